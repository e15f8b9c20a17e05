"""The program model: what a training script does with the library, asked by every rule as
``self.program``.

``model.Program`` on top; sub-packages by concern below it, each importing only those under it
(ARCHITECTURE.md). May import ``smpfix.job`` and ``smpfix.base``; it knows no rule and never
reports."""
