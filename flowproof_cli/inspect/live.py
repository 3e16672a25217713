"""`run --inspect`: a run's flows handed to the mitmweb child as they finish, commented.

Nothing at all without the flag; with it, the view keeps serving after the run has its
verdicts, until Ctrl-C (`LiveView.finish`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flowproof_cli.errors import ConfigError
from flowproof_cli.inspect.trace_flows import turn_comment
from flowproof_cli.inspect.web_view import WebView

if TYPE_CHECKING:
    from mitmproxy import http

log = logging.getLogger(__name__)


class FlowTap:
    """An addon on the run's master: each finished flow, commented, handed to the view.

    It runs after the boundaries, so a divergent turn arrives marked with its summary.
    """

    def __init__(self, view: WebView):
        self._view = view
        self._turns: dict[int, int] = {}  # listening port -> model turns seen on it

    def _comment(self, flow: http.HTTPFlow) -> None:
        from flowproof_addons.conversation import CONVERSATION_TURN, tools_called  # noqa: PLC0415
        from flowproof_cli.dialects import route  # noqa: PLC0415

        dialect = route(flow.request.path, flow.request.headers, flow.request.method)
        if dialect is None or flow.response is None:
            return
        sockname = flow.client_conn.sockname
        port = int(sockname[1]) if sockname else 0
        number = self._turns[port] = self._turns.get(port, 0) + 1
        try:
            request = json.loads(flow.request.get_content(strict=False) or b"{}")
        except ValueError:
            request = {}
        content = flow.response.get_content(strict=False) or b""
        kind = flow.response.headers.get("content-type", "").split(";")[0].strip() or None
        called = tools_called(dialect, request, content, kind)
        conversation = flow.metadata.get(CONVERSATION_TURN)  # set by the session's boundary
        said = conversation if isinstance(conversation, str) else None
        note = turn_comment(number, dialect.name, called, said)
        flow.comment = f"{note}; {flow.comment}" if flow.comment else note

    def response(self, flow: http.HTTPFlow) -> None:
        self._hand_on(flow, comment=True)

    def error(self, flow: http.HTTPFlow) -> None:
        if flow.response is None:
            self._hand_on(flow, comment=False)

    def _hand_on(self, flow: http.HTTPFlow, *, comment: bool) -> None:
        """The view is a bystander: nothing it fails at may disturb the run."""
        try:
            if comment:
                self._comment(flow)
            self._view.feed(flow)
        except Exception as exc:
            log.warning("flowproof: a flow was not shown in mitmweb: %s", exc)


class LiveView:
    """`run --inspect`: the view and its tap (nothing at all without the flag); once the
    run has its verdicts (`ran`), the view keeps serving until Ctrl-C (`finish`)."""

    def __init__(self, view: WebView | None):
        self.view = view
        self.addons: list[Any] = [FlowTap(view)] if view is not None else []
        self.finished = False
        self.url = view.url if view is not None else ""

    @classmethod
    def start(cls, enabled: bool, port: int = 0) -> LiveView:
        if not enabled:
            return cls(None)
        view = WebView(port)
        try:
            view.start()
        except BaseException:
            view.close()
            raise
        return cls(view)

    def run[R](self, runner: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """`runner(*args, **kwargs)` with the tap on the run's proxy (`execute`, `run_jobs`);
        once it returns, the run has its verdicts."""
        result = runner(*args, addons=self.addons, **kwargs)
        self.finished = True
        return result

    def finish(self, say: Callable[[str], None]) -> None:
        """After a finished run, serve until Ctrl-C or SIGTERM; then (always) stop the view."""
        view, self.view = self.view, None
        if view is None:
            return
        try:
            if self.finished:
                # the token was printed once, at the start; the browser holds its cookie
                say(f"inspect: still serving this run's flows at {view.address} (Ctrl-C stops)")
                view.serve_until_stopped()
        except ConfigError as exc:
            say(f"warning: {exc}")
        finally:
            view.close()
