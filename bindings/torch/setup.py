# SPDX-License-Identifier: MIT
# Builds the torch_coll extension against libcoll: from a build tree (COLL_BUILD_DIR, the
# default being this checkout's top directory) or an installed libcoll (pkg-config coll).
#   /usr/bin/python3 bindings/torch/setup.py build_ext --inplace
import os
import subprocess

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.abspath(os.path.join(here, "..", ".."))
build = os.environ.get("COLL_BUILD_DIR", top)
inc, libdirs = [os.path.join(top, "include")], [os.path.join(build, ".libs")]
if not os.path.exists(os.path.join(build, ".libs", "libcoll.so")):
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "coll"], check=True,
                           capture_output=True, text=True).stdout.split()
    inc = [f[2:] for f in flags if f.startswith("-I")]
    libdirs = [f[2:] for f in flags if f.startswith("-L")]

setup(
    name="torch_coll",
    version="0.1.0",
    packages=["torch_coll"],
    package_dir={"torch_coll": here},
    ext_modules=[CppExtension(
        "torch_coll._coll_torch", [os.path.join(here, "coll_torch.cpp")],
        include_dirs=inc, library_dirs=libdirs, libraries=["coll"],
        runtime_library_dirs=libdirs, extra_compile_args=["-O2"])],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)},
)
