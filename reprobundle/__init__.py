"""reprobundle: the command-line layer over the packager (``bundler``) and replayer (``replay``).

The library packages never import this one: ``bundler`` knows nothing of
``replay``, ``replay`` builds on ``bundler``, and only ``reprobundle.cli``
sees both.
"""
