"""X-Ray tracing of a handler, set up by its first invocation instead of at import.

Powertools' `Tracer()` imports the X-Ray SDK when constructed and, with its default
`auto_patch=True`, patches every library the SDK knows that is importable; at module level
both land in the import phase of a cold start. Here the first call builds the tracer
(`auto_patch=False`) and patches only botocore, the one library the functions call AWS
through, so the handler's own subsegment and its AWS calls are traced as before.
`POWERTOOLS_TRACE_DISABLED` and running outside Lambda disable it as Powertools does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

Handler = Callable[[Any, Any], Any]


def traced(handler: Handler) -> Handler:
    """`tracer.capture_lambda_handler`, with the tracer made on the first call."""
    decorated: Handler | None = None

    @functools.wraps(handler)
    def wrapper(event: Any, context: Any) -> Any:
        nonlocal decorated
        if decorated is None:
            from aws_lambda_powertools import Tracer

            tracer = Tracer(auto_patch=False)
            tracer.patch(["botocore"])
            decorated = tracer.capture_lambda_handler(handler)
        return decorated(event, context)

    return wrapper
