"""Child processes the supervisor runs in the tests, as scripts to write out."""

#: output that a pipe must carry unchanged (a long line, bytes that are no UTF-8, a carriage
#: return, stderr between stdout's lines, a tail without a newline), then exit argv[1]
CHILD = r"""
import os, sys
w = sys.stdout.buffer.write
w(b"x" * 1_000_000 + b"\n")
w(b"bad bytes \xff\xfe\n")
w(b"tqdm  10%|#  |\rtqdm 100%|###|\n")
sys.stdout.flush()
os.write(2, b"on stderr\n")
w(b"tail without newline")
sys.stdout.flush()
sys.exit(int(sys.argv[1]))
"""
