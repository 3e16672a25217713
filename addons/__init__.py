"""flowproof's mitmproxy addons, one module per boundary (installed as `flowproof_addons`).

Each boundary also loads into stock mitmproxy: `mitmdump -s "$(flowproof addons path model)"
--set ...` (`flowproof_cli/cli/addons.py` finds the installed script; in a checkout it is
`addons/model.py`).
"""
