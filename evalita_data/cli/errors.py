"""One clear line instead of a traceback, for both command-line tools.

Commands raise errors that already name the file and what was expected; anything else
that escapes a command is still shown as one line (``error: ...``, exit 1), and the
traceback only with ``--debug``. Ctrl-C exits 130 with one line.
"""

from __future__ import annotations

import errno
import signal
import sys

import click

INTERRUPTED = 130


def one_line(err: BaseException) -> str:
    """The message of an unexpected error, on one line, naming the file where there is one."""
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        where = f" writing {err.filename}" if err.filename else ""
        return f"no space left on the device{where}; free some space and run the command again"
    if isinstance(err, OSError) and err.strerror and err.filename:
        return f"{err.filename}: {err.strerror}"
    text = " ".join(str(err).split()) or type(err).__name__
    if not isinstance(err, (ValueError, OSError, KeyError)) or not str(err):
        text = f"{type(err).__name__}: {text}"
    return text[:600]


class FriendlyGroup(click.Group):
    """A command group with ``--debug``: without it, unexpected errors are one line, not a traceback."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(click.Option(["--debug"], is_flag=True, expose_value=False, is_eager=True,
                                        callback=_remember_debug, help="Show the full traceback of an error."))

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            if ctx.meta.get("evalita.debug"):
                raise
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C during the shutdown is quiet
            click.echo("interrupted (Ctrl-C)", err=True)
            sys.exit(INTERRUPTED)
        except Exception as err:  # noqa: BLE001 - the last resort: one line, the traceback with --debug
            if ctx.meta.get("evalita.debug"):
                raise
            click.echo(f"error: {one_line(err)}", err=True)
            click.echo("(run with --debug before the command name for the traceback)", err=True)
            sys.exit(1)


def _remember_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.meta["evalita.debug"] = True


def debugging() -> bool:
    """Whether ``--debug`` was given (commands that catch errors themselves re-raise then)."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.meta.get("evalita.debug"))
