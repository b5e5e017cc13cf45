# SPDX-License-Identifier: BSD-3-Clause
"""The ctypes structures of python/sigma/_lib.py against the C compiler's
layout of client/sigma.h, client/sigma_local.h and control/sg_ctl_client.h: every size and field
offset (abi_offsets prints them). A field added to the C side makes the
structure larger than its mirror and fails here, so the binding follows."""

import ctypes
import json
import subprocess
import sys
import unittest

import sgtest  # puts the package on sys.path
from sigma import _lib

assert sgtest.SRC

OFFSETS = sys.argv.pop(1) if len(sys.argv) > 1 else None


class Abi(unittest.TestCase):
    def test_layouts(self) -> None:
        if OFFSETS is None:
            self.skipTest("give the abi_offsets program")
        c = json.loads(subprocess.run([OFFSETS], check=True, capture_output=True,
                                      text=True).stdout)
        self.assertEqual(len(c), 16)
        for name, fields in c.items():
            cls = getattr(_lib, name)
            with self.subTest(struct=name):
                self.assertEqual(ctypes.sizeof(cls), fields.pop("sizeof"),
                                 f"{name}: the C structure's size changed: mirror it in _lib.py")
                mirrored = {f[0] for f in cls._fields_}
                self.assertEqual(set(fields), mirrored, f"{name}: fields differ")
                for fname, off in fields.items():
                    self.assertEqual(getattr(cls, fname).offset, off, f"{name}.{fname}")

    def test_padded_tails(self) -> None:
        # what libsigma copies whole gets zeroes after it (fields a later minor
        # version may append read as their defaults)
        for outer, inner in ((_lib.SigmaConfPadded, _lib.SigmaConf),
                             (_lib.CtlJobSpecPadded, _lib.CtlJobSpec),
                             (_lib.SigmaJobPadded, _lib.SigmaJob),
                             (_lib.SigmaLocalConfPadded, _lib.SigmaLocalConf)):
            self.assertGreaterEqual(ctypes.sizeof(outer), ctypes.sizeof(inner) + 256)
            self.assertEqual(bytes(outer())[ctypes.sizeof(inner):],
                             bytes(ctypes.sizeof(outer) - ctypes.sizeof(inner)))

    def test_vocabulary(self) -> None:
        # the names and values of sg_types.h, read back through libsigma itself
        lib = _lib.libsigma()
        lib.sg_dtype_name.restype = ctypes.c_char_p
        lib.sg_dtype_size.restype = ctypes.c_size_t
        lib.sg_mode_name.restype = ctypes.c_char_p
        for name, val in _lib.DTYPES.items():
            self.assertEqual(lib.sg_dtype_name(val).decode(), name)
            self.assertEqual(lib.sg_dtype_size(val), _lib.DTYPE_SIZES[name])
        self.assertEqual(lib.sg_dtype_name(_lib.SG_DTYPE_ANY).decode(), "any")
        for name, val in _lib.MODES.items():
            self.assertEqual(lib.sg_mode_name(val).decode(), name)


if __name__ == "__main__":
    unittest.main()
