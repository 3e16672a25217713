"""`flowproof inspect` and `run --inspect`: flows shown in a mitmweb child.

`web_view.py` runs the child and feeds it; `trace_flows.py` turns a recorded trace into
commented flows; `live.py` hands a running flow's traffic to the view as it finishes.
"""
