"""The bundle format: container, DSSE, manifest, tables and their contract, keys, vocabulary.

Nothing here imports the campaign reader, the importers or the commands above it.
"""
