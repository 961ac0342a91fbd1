"""Views of one ReplayResult: terminal text, JSON, Markdown and HTML."""
