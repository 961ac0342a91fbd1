"""reprobundle replayer: re-derives statistics and verdicts from a sealed bundle."""

__all__: list[str] = []
