"""Match rules: the declared, narrow, reported relaxations of strict request matching.

`paths` (globs over a canonical request), `relocate` ({cwd}/{home}), `rules` (the rule kinds
and their counts), `presets` (named rule sets as data), `addons` (matcher scripts), `build`
(a flow's rules from its suite's and its own `match:` blocks). Nothing here knows HTTP or
files beyond the scripts and presets it loads.
"""
