"""LLM-serving campaigns: inputs from imported sources, statistics, claims, conformance."""
