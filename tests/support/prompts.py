"""Realistic user prompts made from templates, deterministic by seed: the semantic cache's test and bench corpus.

Prompts come from ~50 question templates over topic lists (so neighbours share a template and differ by a value,
the hard case for a similarity search), plus variants that reword a prompt the way users do (a polite prefix,
lower case, no question mark, a synonym) for queries that should find it.
"""

from __future__ import annotations

import random

_TECH = ("Python", "JavaScript", "TypeScript", "Go", "Rust", "Java", "C#", "C++", "Ruby", "PHP", "Kotlin", "Swift",
         "Scala", "Elixir", "Haskell", "Bash", "SQL", "R", "Julia", "Lua", "Dart", "Perl", "Clojure", "OCaml")
_TASK = ("reverse a list", "sort a dictionary by value", "read a file line by line", "parse JSON",
         "make an HTTP request", "remove duplicates from a list", "merge two dictionaries", "format a date",
         "split a string", "convert a string to an integer", "handle exceptions", "write unit tests",
         "create a class", "use regular expressions", "connect to a database", "read environment variables",
         "run code in parallel", "measure execution time", "generate random numbers", "flatten a nested list",
         "check if a file exists", "iterate over a dictionary", "concatenate strings", "round a number",
         "compare two strings", "find the maximum of a list", "write to a CSV file", "parse command line arguments",
         "create a virtual environment", "debug a memory leak", "profile slow code", "serialise an object",
         "define an interface", "use generics", "read user input", "copy a directory", "zip two lists",
         "count word frequencies", "validate an email address", "hash a password", "send an email")
_COUNTRY = ("France", "Germany", "Italy", "Spain", "Portugal", "Japan", "China", "India", "Brazil", "Canada",
            "Mexico", "Egypt", "Kenya", "Nigeria", "Australia", "Argentina", "Chile", "Peru", "Norway", "Sweden",
            "Finland", "Poland", "Greece", "Turkey", "Vietnam", "Thailand", "Indonesia", "Ireland", "Austria",
            "Hungary", "Morocco", "Ghana", "Colombia", "Iceland", "Denmark", "Belgium", "Netherlands",
            "Switzerland", "South Korea", "New Zealand")
_FACT = ("capital", "population", "official language", "currency", "largest city", "national dish",
         "highest mountain", "longest river", "form of government", "climate", "national anthem", "time zone",
         "area", "main export", "independence day", "flag")
_TOPIC = ("the ocean", "autumn", "a lost cat", "friendship", "the city at night", "coffee", "the moon",
          "a rainy Monday", "mountains", "the first day of school", "a robot learning to love", "old books",
          "the desert", "a summer storm", "trains", "a lighthouse", "winter mornings", "the stock market",
          "a garden", "space travel", "a grandmother's kitchen", "jazz", "the forest", "a broken phone")
_FORM = ("haiku", "limerick", "short poem", "sonnet", "short story", "song", "joke", "tweet", "riddle",
         "bedtime story", "product description", "motivational quote")
_CONCEPT = ("photosynthesis", "inflation", "blockchain", "quantum entanglement", "the theory of relativity",
            "machine learning", "the immune system", "supply and demand", "black holes", "DNA replication",
            "climate change", "compound interest", "neural networks", "plate tectonics", "the water cycle",
            "public key cryptography", "the French Revolution", "evolution", "gravity", "recursion",
            "TCP congestion control", "garbage collection", "the stock market", "vaccines", "democracy",
            "the Pythagorean theorem", "entropy", "opportunity cost", "the greenhouse effect", "CRISPR")
_AUDIENCE = ("a five-year-old", "a high school student", "a software engineer", "my grandmother",
             "a beginner", "an expert", "a manager", "a teenager")
_LANG = ("French", "Spanish", "German", "Italian", "Japanese", "Chinese", "Korean", "Portuguese", "Russian",
         "Arabic", "Hindi", "Dutch", "Swedish", "Turkish", "Greek", "Polish")
_PHRASE = ("good morning", "thank you very much", "where is the train station", "I love you", "how much is this",
           "nice to meet you", "see you tomorrow", "I am hungry", "what time is it", "happy birthday",
           "excuse me", "the bill, please", "I don't understand", "have a nice day", "good night")
_FOOD = ("pancakes", "lasagna", "banana bread", "chicken curry", "sourdough bread", "chocolate chip cookies",
         "guacamole", "pad thai", "risotto", "ramen", "apple pie", "falafel", "tomato soup", "pizza dough",
         "fried rice", "brownies", "hummus", "paella", "tacos", "a vegan burger")
_PROBLEM = ("my laptop is slow", "my Wi-Fi keeps disconnecting", "my phone battery drains fast",
            "I can't sleep", "my code throws a null pointer exception", "my car won't start",
            "my printer is offline", "git says detached HEAD", "Docker can't find the image",
            "my houseplant has yellow leaves", "my sourdough doesn't rise", "my bike chain keeps slipping",
            "npm install fails", "the kitchen sink is clogged", "my screen flickers")
_THING = ("a birthday party", "a team-building event", "a blog", "a startup", "a podcast", "a weekend trip",
          "a science fair project", "a mobile app", "a garden", "a wedding speech", "a YouTube channel",
          "a board game night", "a fundraiser", "a side project", "a date night")
_UNIT = (("USD", "EUR"), ("EUR", "GBP"), ("miles", "kilometres"), ("pounds", "kilograms"), ("Celsius", "Fahrenheit"),
         ("inches", "centimetres"), ("litres", "gallons"), ("hours", "minutes"), ("JPY", "USD"), ("feet", "metres"))
_PAIR = (("Python", "JavaScript"), ("cats", "dogs"), ("tea", "coffee"), ("renting", "buying a house"),
         ("SQL", "NoSQL databases"), ("React", "Vue"), ("iPhone", "Android"), ("running", "swimming"),
         ("stocks", "bonds"), ("TCP", "UDP"), ("Mac", "Windows"), ("electric cars", "hybrid cars"),
         ("Kubernetes", "Docker Swarm"), ("yoga", "pilates"), ("Rust", "Go"), ("Spotify", "Apple Music"))

_CONSTRAINT = ("using any libraries", "a for loop", "recursion", "mutating the input", "extra memory",
               "regular expressions", "third-party packages", "blocking the main thread", "global variables",
               "exceptions", "copying the data", "changing the function signature", "an ORM", "a framework",
               "breaking backwards compatibility")
_ARTIFACT = ("web server", "unit test", "build", "Docker container", "CLI tool", "data pipeline", "REST API",
             "background job", "database migration", "GUI app")
_SYMPTOM = ("crashes on startup", "hangs forever", "uses too much memory", "is very slow",
            "returns the wrong result", "fails only in CI", "leaks file handles", "prints garbled text",
            "times out", "works locally but not in production", "deadlocks under load", "randomly fails")
_STYLE = ("Shakespeare", "a pirate", "Dr. Seuss", "a news anchor", "Edgar Allan Poe", "a sports commentator",
          "a noir detective", "a children's book", "a corporate memo", "a fairy tale", "Hemingway", "a rap song")

_TEMPLATES = (
    ("How do I {task} in {tech} without {constraint}?", {"task": _TASK, "tech": _TECH, "constraint": _CONSTRAINT}),
    ("Write a {tech} script that can {task} and then {task2}", {"tech": _TECH, "task": _TASK, "task2": _TASK}),
    ("Compare how to {task} in {tech} and in {tech2}", {"task": _TASK, "tech": _TECH, "tech2": _TECH}),
    ("Explain {concept} to {audience} using an analogy about {topic}",
     {"concept": _CONCEPT, "audience": _AUDIENCE, "topic": _TOPIC}),
    ("Translate '{phrase}' from {lang} into {lang2}", {"phrase": _PHRASE, "lang": _LANG, "lang2": _LANG}),
    ("Describe the {fact} of {country} for {audience}", {"fact": _FACT, "country": _COUNTRY, "audience": _AUDIENCE}),
    ("My {tech} {artifact} {symptom}. How do I debug it?", {"tech": _TECH, "artifact": _ARTIFACT, "symptom": _SYMPTOM}),
    ("Write a {form} about {topic} in the style of {style}", {"form": _FORM, "topic": _TOPIC, "style": _STYLE}),
    ("How do I {task} in {tech}?", {"task": _TASK, "tech": _TECH}),
    ("What's the best way to {task} in {tech}?", {"task": _TASK, "tech": _TECH}),
    ("Write a {tech} function to {task}", {"task": _TASK, "tech": _TECH}),
    ("Show me an example of how to {task} using {tech}", {"task": _TASK, "tech": _TECH}),
    ("Why does my {tech} code fail when I try to {task}?", {"task": _TASK, "tech": _TECH}),
    ("What is the {fact} of {country}?", {"fact": _FACT, "country": _COUNTRY}),
    ("Tell me about the {fact} of {country}", {"fact": _FACT, "country": _COUNTRY}),
    ("Compare the {fact} of {country} and {country2}", {"fact": _FACT, "country": _COUNTRY, "country2": _COUNTRY}),
    ("Write a {form} about {topic}", {"form": _FORM, "topic": _TOPIC}),
    ("Can you write me a {form} about {topic}?", {"form": _FORM, "topic": _TOPIC}),
    ("Write a funny {form} about {topic} for {audience}", {"form": _FORM, "topic": _TOPIC, "audience": _AUDIENCE}),
    ("Explain {concept} to {audience}", {"concept": _CONCEPT, "audience": _AUDIENCE}),
    ("What is {concept}?", {"concept": _CONCEPT}),
    ("Give me a short summary of {concept}", {"concept": _CONCEPT}),
    ("What are the pros and cons of {concept}?", {"concept": _CONCEPT}),
    ("How is {concept} related to {concept2}?", {"concept": _CONCEPT, "concept2": _CONCEPT}),
    ("Translate '{phrase}' into {lang}", {"phrase": _PHRASE, "lang": _LANG}),
    ("How do you say '{phrase}' in {lang}?", {"phrase": _PHRASE, "lang": _LANG}),
    ("Give me a recipe for {food}", {"food": _FOOD}),
    ("How long should I bake {food}?", {"food": _FOOD}),
    ("What can I use instead of eggs in {food}?", {"food": _FOOD}),
    ("Make a shopping list for {food} for {n} people", {"food": _FOOD, "n": range(2, 13)}),
    ("Help, {problem}. What should I do?", {"problem": _PROBLEM}),
    ("How do I fix it when {problem}?", {"problem": _PROBLEM}),
    ("Give me {n} ideas for {thing}", {"n": range(3, 16), "thing": _THING}),
    ("Plan {thing} on a budget of {n} dollars", {"thing": _THING, "n": (50, 100, 200, 250, 500, 1000, 2000)}),
    ("Convert {n} {unit}", {"n": range(1, 1001), "unit": _UNIT}),
    ("What is {n} percent of {m}?", {"n": range(1, 100), "m": range(10, 1000, 10)}),
    ("What is {n} times {m}?", {"n": range(2, 100), "m": range(2, 100)}),
    ("Is {n} a prime number?", {"n": range(2, 10000)}),
    ("Which is better, {pair}?", {"pair": _PAIR}),
    ("What are the differences between {pair}?", {"pair": _PAIR}),
    ("Should I choose {pair} as a {audience}?", {"pair": _PAIR, "audience": _AUDIENCE}),
    ("Recommend {n} books about {concept}", {"n": range(2, 11), "concept": _CONCEPT}),
    ("Create a {n}-day study plan for learning {tech}", {"n": range(3, 31), "tech": _TECH}),
    ("Create a {n}-day itinerary for a trip to {country}", {"n": range(2, 22), "country": _COUNTRY}),
    ("What should I pack for a trip to {country} in winter?", {"country": _COUNTRY}),
    ("Is it safe to drink tap water in {country}?", {"country": _COUNTRY}),
    ("Write an email to my manager asking for {n} days off", {"n": range(1, 30)}),
    ("Write a cover letter for a {tech} developer job", {"tech": _TECH}),
    ("What interview questions should I expect for a {tech} role?", {"tech": _TECH}),
    ("Summarise the history of {country} in {n} sentences", {"country": _COUNTRY, "n": range(2, 11)}),
    ("Give me a {n}-minute workout I can do at home", {"n": range(5, 61, 5)}),
    ("How many calories are in {food}?", {"food": _FOOD}),
    ("Quiz me on {concept} with {n} questions", {"concept": _CONCEPT, "n": range(3, 21)}),
)


def _fill(template: str, slots: dict, rng: random.Random) -> str:
    values = {}
    for name, options in slots.items():
        value = rng.choice(options)
        if name == "unit":
            value = f"{value[0]} to {value[1]}"
        elif name == "pair":
            value = f"{value[0]} or {value[1]}" if "better" in template or "choose" in template else \
                f"{value[0]} and {value[1]}"
        values[name] = value
    return template.format(**values)


def _capacity(slots: dict) -> int:
    total = 1
    for options in slots.values():
        total *= len(options)
    return total


#: templates are drawn in proportion to how many prompts they can make, up to 6,000 (so arithmetic with its
#: ten thousand values does not crowd out the rest)
_WEIGHTS = [min(_capacity(slots), 6000) for _, slots in _TEMPLATES]


def prompts(count: int, seed: int = 1) -> list[str]:
    """``count`` distinct prompts (deterministic for a seed; up to ~120,000)."""
    rng = random.Random(seed)
    seen: dict[str, None] = {}
    attempts = 0
    while len(seen) < count:
        attempts += 1
        if attempts > count * 20:
            raise ValueError(f"the templates cannot make {count} distinct prompts")
        template, slots = rng.choices(_TEMPLATES, _WEIGHTS)[0]
        seen.setdefault(_fill(template, slots, rng), None)
    return list(seen)


_PREFIXES = ("Please tell me: ", "Quick question: ", "Hey, ", "Can you help? ", "I was wondering, ")
_SYNONYMS = (("How do I", "How can I"), ("What is", "What's"), ("Write", "Compose"), ("Give me", "Provide"),
             ("Explain", "Describe"), ("Tell me about", "Describe"), ("best way", "easiest way"),
             ("Create", "Make"), ("Help,", "Please help,"))


def reworded(prompt: str, rng: random.Random) -> str:
    """The prompt as another user might type it (same question, same values)."""
    way = rng.randrange(4)
    if way == 0:
        return rng.choice(_PREFIXES) + prompt[0].lower() + prompt[1:]
    if way == 1:
        return prompt.lower().rstrip("?")
    if way == 2:
        for a, b in _SYNONYMS:
            if a in prompt:
                return prompt.replace(a, b, 1)
    return prompt.rstrip("?") + ", please" + ("?" if prompt.endswith("?") else "")
