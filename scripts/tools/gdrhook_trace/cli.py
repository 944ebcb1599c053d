# SPDX-License-Identifier: MIT
"""The command line: gdrhook-trace summary|leaks|perfetto|plot LOG..."""

import argparse
import json
import os
import sys

from . import __version__, analysis, core, perfetto, reports, schema, svg
from .reader import Fatal, PROG, EXIT_OK, EXIT_USAGE, expand


def reader_stats(args, run):
    if args.reader_stats:
        sys.stderr.write("%s: reader: %s\n" % (PROG, json.dumps(
            run.reader, sort_keys=True)))


def cmd_summary(args):
    run = analysis.analyse(args.log, args.pid, args.quiet,
                           buffer=args.buffer, c=args.c)
    js = reports.summary_json(run)
    reader_stats(args, run)
    if args.json:
        reports.write_out(args.output, json.dumps(js, indent=1) + "\n")
    else:
        reports.write_out(args.output, reports.summary_text(js))
    return EXIT_OK


def cmd_leaks(args):
    run = analysis.analyse(args.log, args.pid, args.quiet,
                           buffer=args.buffer, c=args.c)
    js = reports.leaks_json(run)
    reader_stats(args, run)
    if args.json:
        reports.write_out(args.output, json.dumps(js, indent=1) + "\n")
    else:
        reports.write_out(args.output,
                          reports.leaks_text(js, args.all, args.top))
    return EXIT_OK


def file_output(args, ext):
    """perfetto and plot write tens of kilobytes that mean nothing on a
    terminal: there, without -o, they go to a file named after the (first)
    log, in the current directory, and the tool says where.  "-o -" still
    writes to standard output."""
    if args.output is not None:
        return
    try:
        tty = sys.stdout.isatty()
    except ValueError:
        tty = False
    if not tty:
        return
    base = os.path.basename(args.log[0]) if args.log[0] != "-" else "stdin"
    for suffix in (".gz", ".jsonl", ".json", ".log"):
        if base.endswith(suffix) and base != suffix:
            base = base[:-len(suffix)]
    args.output = base + ext
    args.said_where = True


def say_where(args):
    if getattr(args, "said_where", False):
        sys.stderr.write("%s: wrote %s (standard output is a terminal; "
                         "-o - writes there)\n" % (PROG, args.output))


def cmd_perfetto(args):
    file_output(args, ".perfetto.json")
    w = perfetto.Writer(args.output, args.pid, args.c)
    try:
        run = analysis.analyse(args.log, args.pid, args.quiet, obs=w,
                               buffer=args.buffer, c=args.c)
        w.finish(run)
        reader_stats(args, run)
    finally:
        w.close()
    say_where(args)
    return EXIT_OK


def cmd_plot(args):
    file_output(args, ".svg")
    plot = svg.Plot(args.width)
    run = analysis.analyse(args.log, args.pid, args.quiet, obs=plot,
                           buffer=args.buffer, c=args.c)
    reader_stats(args, run)
    reports.write_out(args.output, svg.plot_svg(run.results, plot))
    say_where(args)
    return EXIT_OK


class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        sys.stderr.write("%s: error: %s\n" % (self.prog, message))
        sys.exit(EXIT_USAGE)


def pid_list(s):
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected PID[,PID...]")


def width_arg(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError("expected an integer")
    if not 600 <= v <= 10000:
        raise argparse.ArgumentTypeError("width must be 600..10000")
    return v


def buffer_arg(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError("expected an integer")
    if v < 2:
        raise argparse.ArgumentTypeError("at least 2")
    return v


class VersionAction(argparse.Action):
    """--version, with the reader in use (finding it takes a moment)."""

    def __call__(self, parser, namespace, values, option_string=None):
        mod, where = core.load()
        reports.write_out(None, "%s %s (reads log format versions %s)\n"
                          "reader: %s\n" % (
                              PROG, __version__,
                              ", ".join(str(v) for v in
                                        sorted(schema.SCHEMAS)),
                              "C (%s)" % where if mod is not None else
                              "pure Python (%s)" % where))
        parser.exit()


def build_parser():
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("log", metavar="LOG", nargs="+",
                        help="gdrhook event log (JSON Lines, optionally "
                        "gzip'ed); '-' reads standard input; several logs "
                        "or a glob (e.g. 'trace.*.jsonl', one per process "
                        "with %%p) are merged on one timeline")
    common.add_argument("-o", "--output", metavar="OUT",
                        help="write here instead of standard output ('-': "
                        "standard output; perfetto and plot write to a "
                        "file named after the log, LOG.perfetto.json or "
                        "LOG.svg, instead of a terminal)")
    common.add_argument("--pid", type=pid_list, metavar="PID[,PID...]",
                        help="only these processes")
    common.add_argument("-q", "--quiet", action="store_true",
                        help="no warnings about the input on stderr")
    # Records the sort keeps in memory before spilling to a temporary
    # file (tests use a tiny one to exercise the merge).
    common.add_argument("--buffer", type=buffer_arg, default=200000,
                        help=argparse.SUPPRESS)
    common.add_argument("--reader", choices=("auto", "c", "python"),
                        default="auto",
                        help="read the library's allocation and "
                        "registration-cache records with the C reader "
                        "installed with the tool (c), in pure Python "
                        "(python), or with the C reader when there is one "
                        "(auto, the default); the results are the same")
    # How many records the C reader took (tests/trace/run).
    common.add_argument("--reader-stats", action="store_true",
                        help=argparse.SUPPRESS)
    ap = Parser(prog=PROG, description="Read a gdrhook event log "
                "(GDRHOOK_TRACE): summarise it, list leaks, export it to "
                "Perfetto, or plot memory over time.",
                epilog="Exit status: 0 ok, 1 usage error or unreadable file,"
                " 2 the log held no usable events.")
    ap.add_argument("--version", action=VersionAction, nargs=0,
                    help="show the version, the log format versions read "
                    "and the reader, and exit")
    sub = ap.add_subparsers(dest="cmd", metavar="SUBCOMMAND",
                            parser_class=Parser)
    sub.required = True
    s = sub.add_parser("summary", parents=[common],
                       help="per-API counts, bytes, time, peaks, problems",
                       description="Per-API call counts and bytes (failed "
                       "calls apart), time inside hooked calls, peak live "
                       "bytes per process and device, registration-cache "
                       "counts, audit disagreements, untrusted warnings "
                       "and dropped events.")
    s.add_argument("--json", action="store_true",
                   help="machine-readable JSON instead of text")
    s.set_defaults(func=cmd_summary)
    s = sub.add_parser("leaks", parents=[common],
                       help="allocations never freed",
                       description="Allocations still live when each "
                       "process exited (or when the log ends), grouped by "
                       "API and thread, largest first.")
    s.add_argument("--json", action="store_true",
                   help="machine-readable JSON instead of text")
    s.add_argument("--all", action="store_true",
                   help="list every leaked allocation")
    s.add_argument("--top", type=int, default=10, metavar="N",
                   help="list the N largest allocations (default 10)")
    s.set_defaults(func=cmd_leaks)
    s = sub.add_parser("perfetto", parents=[common],
                       help="Chrome trace JSON for ui.perfetto.dev",
                       description="Write Chrome trace event JSON (open it "
                       "in ui.perfetto.dev or chrome://tracing): one track "
                       "per thread with each hooked call as a slice, and "
                       "counter tracks of live and pinned bytes per "
                       "device.")
    s.set_defaults(func=cmd_perfetto)
    s = sub.add_parser("plot", parents=[common],
                       help="SVG timeline of live and pinned bytes",
                       description="Write a standalone SVG: live and "
                       "pinned bytes per device over time (step lines), "
                       "one panel per process, with alloc/free markers.")
    s.add_argument("--width", type=width_arg, default=1200, metavar="PX",
                   help="image width in pixels (default 1200)")
    s.set_defaults(func=cmd_plot)
    return ap


def main(argv=None):
    # A string field may hold a lone surrogate escape ("\ud800"): JSON
    # allows it, UTF-8 cannot encode it.  Written escaped, not an error.
    for f in (sys.stdout, sys.stderr):
        try:
            f.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):
            pass
    ap = build_parser()
    args = ap.parse_args(argv)
    args.log = expand(args.log)
    try:
        args.c = core.load(args.reader)[0]
    except ImportError as e:
        raise Fatal("--reader c: %s" % e) from None
    return args.func(args)


def quiet_stdout():
    """Standard output's descriptor onto /dev/null: what is still
    buffered for it is dropped at exit instead of failing there again
    (Python's "Exception ignored ... OSError" lines and status 120)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def run(argv=None):
    """Entry point: an exit status, one line on an error, and never a
    traceback, whatever is left buffered for standard output."""
    try:
        rc = run_main(argv)
    except SystemExit as e:     # --help, --version, a usage error
        rc = e.code if isinstance(e.code, int) else int(e.code is not None)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_stdout()
    except OSError as e:
        # Refused (a full disk) after an error line was written already,
        # or the first write to fail (an end=False write's buffer).
        quiet_stdout()
        if rc == EXIT_OK:
            sys.stderr.write("%s: error: cannot write standard output: "
                             "%s\n" % (PROG, e.strerror or e))
            rc = EXIT_USAGE
    return rc


def run_main(argv):
    try:
        return main(argv)
    except Fatal as e:
        sys.stderr.write("%s: error: %s\n" % (PROG, e))
        return e.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. "| head"): quietly stop.
        quiet_stdout()
        return EXIT_OK
    except MemoryError:
        sys.stderr.write("%s: error: out of memory\n" % PROG)
        return EXIT_USAGE
    except OSError as e:
        # the machine, not the tool: e.g. no room for the sort's
        # temporary file
        sys.stderr.write("%s: error: %s\n" % (PROG, e))
        return EXIT_USAGE
    except Exception as e:  # noqa: BLE001 (a bug: say so, in one line)
        sys.stderr.write("%s: error: internal error (%s: %s); please "
                         "report it with the log\n"
                         % (PROG, type(e).__name__, str(e)[:200]))
        return EXIT_USAGE
