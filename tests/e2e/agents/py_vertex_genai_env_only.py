"""Real agent: google-genai on Vertex AI configured from the environment alone
(GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION), ``genai.Client()``.

With a base URL injected and no project passed in code, google-genai sends the call to the
bare base URL (its "API gateway" mode): flowproof cannot answer it and says why.
"""

from __future__ import annotations

import os
import sys

from google import genai

if __name__ == "__main__":
    client = genai.Client()
    answer = client.models.generate_content(
        model="gemini-2.5-flash", contents=os.environ["FLOWPROOF_PROMPT"]
    )
    print(answer.text)
    sys.exit(0)
