"""What a person wrote, without what their agent wrapped around it.

Agents send the user's words inside an envelope. OpenClaw (2026.9) stamps each user message
with the time, adds its runtime line to the first, and sends its own context as extra user
messages between markers:

    [Sat 2026-12-05 21:06 UTC] What is 2+2?

    Runtime: agent=main | session=agent:main:explicit:s1 | sessionId=s1 | host=vm | …

The messages are recorded as sent (they are what the model read, and what a training sample
must replay); the judge, the hint and the conversation's title read the words alone. A request
made only of the agent's context has no words: it is nobody's next state.

>>> user_words("[Sat 2026-12-05 21:06 UTC] No, shorter.\\n\\nRuntime: agent=main | os=Linux")
'No, shorter.'
>>> user_words("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\\nnone\\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>")
''
>>> user_words("[Sat 2026-12-05 21:06 UTC] \\n\\nRuntime: agent=main | os=Linux")
''
>>> user_words("[1] is the first footnote")
'[1] is the first footnote'
"""

from __future__ import annotations

import re

_STAMP = re.compile(
    r"^\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{4}-\d{2}-\d{2} \d{1,2}:\d{2}(?::\d{2})?"
    r"[^\]\n]{0,40}\]\s*"
)
_RUNTIME = re.compile(r"\n\s*Runtime: agent=[^\n]*\s*$")
_INTERNAL = re.compile(
    r"<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>.*?<<<END_OPENCLAW_INTERNAL_CONTEXT>>>", re.DOTALL
)


def user_words(content: str) -> str:
    """``content`` without an agent's time stamp, runtime line and internal context."""
    text = _RUNTIME.sub("", _INTERNAL.sub("", content).strip())
    return _STAMP.sub("", text).strip()
