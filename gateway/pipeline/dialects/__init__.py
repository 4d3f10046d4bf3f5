"""Front doors: API dialects other than chat completions (the Responses API, the Messages API), served over every
provider by one mechanism (``base.Dialect``, ``door.door_pipeline``). See docs/front-doors.md."""
