"""The reprobundle contract: prose specs and JSON Schemas.

Importable only so that an installed reprobundle can read its own schemas
(``importlib.resources.files("specs") / "schemas"``).
"""
