"""Private helpers of the packager; not a public API."""
