"""Fuzzing as a standing check (issue 12): strategies, properties and the bounded CI run."""
