"""Where measured programs come from: one ``ProgramSource`` interface (base.py), one module per kind.

Each module registers its source; ``open_source(path)`` returns the latest registered kind that
recognises the path. A new kind of source is one new module imported here (or, from outside the
package, a ``ProgramSource`` subclass passed to ``register_source``).
"""

# The latest registered kind is tried first: a MetaSchedule database directory also holds .json
# files that would pass for a bare folder of TenSet record files, so TenSet registers first.
from . import tenset  # noqa: I001,F401 - importing registers the source
from . import metaschedule  # noqa: F401
from . import metaschedule_runs  # noqa: F401 - a folder of databases; a database itself is refused by its detect
from .base import (LiveProgram, LiveSource, ProgramSource, SourceError, SourceProgram, Unit, UnitPrograms,
                   open_source, register_source, source_kinds)

__all__ = ["LiveProgram", "LiveSource", "ProgramSource", "SourceError", "SourceProgram", "Unit", "UnitPrograms",
           "open_source", "register_source", "source_kinds"]
