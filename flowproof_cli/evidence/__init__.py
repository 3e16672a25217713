"""Evidence: what a run leaves behind for someone who was not there to watch it.

Every `record` and `run` writes a run record (`records`): the verdict of each flow tied to
the sha256 of the spec and the trace it judged, and the row of each declared control
(`controls`). `flowproof audit` (`audit`) answers from those records alone, without
replaying. The secret scan and the trajectory diff of a reviewed re-record live here too.
Nothing here imports the proxy engine: reading evidence must stay cheap.
"""
