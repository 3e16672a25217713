"""A support bot on LangGraph: a model node and a tool node, its memory a `MemorySaver`
checkpointer keyed by a `thread_id`.

Each message is one `graph.invoke({"messages": [message]}, config)`: only the new message
goes in, and the checkpointer restores the thread's earlier messages. The model is
langchain-openai's ChatOpenAI (Chat Completions; it reads OPENAI_BASE_URL, OPENAI_API_KEY).
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from orders import SYSTEM, converse, main_guarded, run_tool


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order's delivery status."""
    return run_tool("lookup_order", {"order_id": order_id})


@tool
def cancel_order(order_id: str) -> str:
    """Cancel an order. Destructive."""
    return run_tool("cancel_order", {"order_id": order_id})


@tool
def issue_refund(order_id: str) -> str:
    """Refund an order in full. Destructive."""
    return run_tool("issue_refund", {"order_id": order_id})


TOOLS = [lookup_order, cancel_order, issue_refund]


def build() -> Any:
    model = ChatOpenAI(model=os.environ.get("AGENT_MODEL", "gpt-4o-mini"), max_retries=0)
    bound = model.bind_tools(TOOLS)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke([SystemMessage(SYSTEM), *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=MemorySaver())


def main() -> int:
    graph = build()
    config = {"configurable": {"thread_id": os.environ.get("AGENT_THREAD", "support-1")}}

    def answer(text: str) -> str:
        state = graph.invoke({"messages": [HumanMessage(text)]}, config)
        return str(state["messages"][-1].content)

    return converse(answer)


if __name__ == "__main__":
    main_guarded(main)
