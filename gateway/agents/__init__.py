"""The A2A agent data path: registered agents' cards served with the gateway as their endpoint, and JSON-RPC calls
relayed to them under the gateway's keys, records, limits and guardrails (docs/agents.md)."""
