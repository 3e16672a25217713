"""The tools of `llm --functions tools.py`: each top-level function is one tool."""


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny, 24 C in {city}"
