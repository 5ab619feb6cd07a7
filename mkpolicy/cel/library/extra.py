"""cel-spec extension libraries that Kubernetes does not enable.

They are registered into :data:`mkpolicy.cel.library.EXTRAS` and only available when
an environment asks for them (the conformance tests do); policy expressions cannot
use them.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library import EXTRAS, Library, function

ENCODERS = EXTRAS.setdefault("encoders", Library())


@function("base64.encode", signatures=["(bytes) -> string"], library=ENCODERS)
def base64_encode(value: Any) -> str:
    if type(value) is not bytes:
        raise no_overload("base64.encode", value)
    return base64.b64encode(value).decode("ascii")


@function("base64.decode", signatures=["(string) -> bytes"], library=ENCODERS)
def base64_decode(value: Any) -> bytes:
    if type(value) is not str:
        raise no_overload("base64.decode", value)
    text = value
    # cel-go accepts both padded and unpadded input.
    if len(text) % 4:
        text += "=" * (4 - len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise EvalError("base64.decode: illegal base64 data") from None
