"""Errors of the package. The C++ core's errors keep their message: "[operation] what
was expected" (e.g. "[hd_chunked] kernels are for 14 query heads, q has 12 ...")."""
import functools


class Error(RuntimeError):
    """An error of the oal C++ core or of this package; the message starts with the
    operation in brackets."""


def fail(op, message):
    """Raises Error("[op] message")."""
    raise Error(f"[{op}] {message}")


def check(condition, op, message):
    if not condition:
        fail(op, message)


def translated(fn):
    """Re-raises the C++ core's errors (RuntimeError "[op] ...") as Error, same message."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Error:
            raise
        except RuntimeError as e:
            message = str(e)
            if message.startswith("["):
                raise Error(message) from None
            raise
    return wrapper
