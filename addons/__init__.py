"""flowproof's mitmproxy addons, one module per boundary (installed as `flowproof_addons`).

Each module also loads into stock mitmproxy: `mitmdump -s addons/model.py --set ...`.
"""
