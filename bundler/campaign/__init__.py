"""Reading and checking a campaign directory.

Load, columnar reader, sanitizer, plan check and the ``bundle init`` skeleton.
"""
