"""`flowproof doctor` and `flowproof init`: one run of the agent against canned replies.

`diagnosis.py` runs the command once (no spec, no model, no key) and reports what reached
the proxy; `starter.py` runs it the same way and writes a starter spec from what it saw.
"""
