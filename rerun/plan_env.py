"""Which environment variables a sealed plan may hand to a server the auditor launches.

``launch.<arm>.env`` is the bundle author's text. Some variables make any
process (or the dynamic loader, the shell, an interpreter it starts) load or
run code named by the value: ``LD_PRELOAD``, ``BASH_ENV``, ``PYTHONPATH``,
``NODE_OPTIONS``, ... Applied to the auditor's own ``--launch-command``, such a
variable would run the author's code by another door. :data:`AUTHOR_ENV_DENYLIST`
lists them (names, prefixes, suffixes); :func:`env_refusal` says why one name
is refused. The rule is applied only where the auditor did not opt in to the
bundle's own launch command (``--run-bundle-launch-command``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["AUTHOR_ENV_DENYLIST", "ENV_NAME", "EnvDenylist", "env_refusal"]

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A portable environment variable name (matched in full)."""


@dataclass(frozen=True)
class EnvDenylist:
    """Variable names that make a process run code chosen by whoever sets them."""

    names: frozenset[str]
    prefixes: tuple[str, ...]
    suffixes: tuple[str, ...]

    def why(self, name: str) -> str | None:
        """Why ``name`` is on the list (case-sensitive, as the loader and shells read it)."""
        if name in self.names:
            return (
                f"{name} makes the server's process (or a shell or interpreter it starts) "
                "load or run code the value names"
            )
        for p in self.prefixes:
            if name.startswith(p):
                return f"variables named {p}* steer the dynamic loader or define shell functions"
        for s in self.suffixes:
            if name.endswith(s):
                return f"variables named *{s} make a program load a library the value names"
        return None


AUTHOR_ENV_DENYLIST = EnvDenylist(
    names=frozenset(
        {
            # The dynamic loader and glibc.
            "GCONV_PATH",
            "GLIBC_TUNABLES",
            "HOSTALIASES",
            "LOCPATH",
            "NLSPATH",
            # Shells: start-up files, options, functions, prompts, word splitting, command search.
            "BASH_ENV",
            "BASHOPTS",
            "ENV",
            "IFS",
            "PATH",
            "PROMPT_COMMAND",
            "PS4",
            "SHELLOPTS",
            "ZDOTDIR",
            # Python.
            "PYTHONBREAKPOINT",
            "PYTHONHOME",
            "PYTHONINSPECT",
            "PYTHONPATH",
            "PYTHONSTARTUP",
            "PYTHONUSERBASE",
            "PYTHONWARNINGS",
            # Other interpreters and runtimes.
            "JAVA_TOOL_OPTIONS",
            "JDK_JAVA_OPTIONS",
            "_JAVA_OPTIONS",
            "NODE_OPTIONS",
            "NODE_PATH",
            "PERL5DB",
            "PERL5LIB",
            "PERL5OPT",
            "PERLLIB",
            "RUBYLIB",
            "RUBYOPT",
        }
    ),
    prefixes=("LD_", "DYLD_", "BASH_FUNC_"),
    # *_INJECTION64_PATH: CUDA and NVTX load the library the value names into the process.
    suffixes=("_PRELOAD", "_INJECTION_PATH", "_INJECTION32_PATH", "_INJECTION64_PATH"),
)
"""What a plan's ``launch.<arm>.env`` may not set without ``--run-bundle-launch-command``.

Exact names, plus every name starting with ``LD_``, ``DYLD_`` or ``BASH_FUNC_``
and every name ending in ``_PRELOAD`` or ``_INJECTION[32|64]_PATH``. A list of
known doors, not a proof that every other variable is inert: the opt-in and
``--env`` (the auditor's own values) are the way to anything else."""


def env_refusal(name: str) -> str | None:
    """Why a plan may not set ``name`` for the auditor's command, or None when it may."""
    if ENV_NAME.fullmatch(name) is None:
        return "not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
    return AUTHOR_ENV_DENYLIST.why(name)
