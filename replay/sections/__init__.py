"""The verdict sections of a replay: each derives one part of the result from ReplayInputs."""
