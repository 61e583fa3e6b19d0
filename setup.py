"""`pip install .`: the Python package spattn (python/spattn) with its C++ extension spattn._spattn, built by CMake.

setuptools drives CMake here instead of compiling: build_ext configures the project with only the Python module
(SPATTN_BUILD_PYTHON=ON; tests, tools and benchmarks OFF; Release), builds the target _spattn and copies it beside
the pure-Python files that setuptools installs. The metadata is in pyproject.toml; the version is the one in
CMakeLists.txt's project() (read here, written nowhere else).

Offline (Debian 12: setuptools, wheel and pybind11 from apt, no PyPI): `pip install --no-build-isolation .`.

Environment, all optional:
  SPATTN_ENABLE_CUDA          ON / OFF; unset: ON when nvcc is found (CUDACXX, PATH, /usr/local/cuda/bin/nvcc)
  SPATTN_CUDA_ARCHITECTURES   e.g. "90a" or "80;90a": CMAKE_CUDA_ARCHITECTURES and the backend's -gencode flags
                              (unset: the backend's default, sm_80 + sm_90a)
  SPATTN_CMAKE_ARGS           more configure arguments, split as a shell would (e.g. "-DSPATTN_WERROR=ON")
  SPATTN_BUILD_DIR            the CMake build tree (default build-pip/ in the source tree; kept, so a second
                              install recompiles only what changed)
  CMAKE_BUILD_PARALLEL_LEVEL  compile jobs (default: all cores)
CMake itself reads CXX, CUDACXX, CUDAHOSTCXX, CMAKE_GENERATOR, CMAKE_PREFIX_PATH and
CMAKE_{C,CXX}_COMPILER_LAUNCHER (ccache) from the environment.
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def cmake_project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        found = re.search(r"project\(\s*spattn\s+VERSION\s+([0-9][0-9.]*)", f.read())
    if not found:
        raise RuntimeError("CMakeLists.txt: no `project(spattn VERSION x.y.z` to take the version from")
    return found.group(1)


def find_nvcc():
    candidates = [os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def switch(name):
    """An ON/OFF environment variable: True, False, or None when unset or empty."""
    value = os.environ.get(name, "").strip().upper()
    if not value:
        return None
    if value in ("1", "ON", "TRUE", "YES"):
        return True
    if value in ("0", "OFF", "FALSE", "NO"):
        return False
    raise RuntimeError(f"{name}={os.environ[name]!r}: expected ON or OFF")


def pybind11_cmake_dir():
    """pybind11's CMake package as installed for this Python (pip's pybind11), or None to leave it to
    find_package: when there is none, or when it is the version CMake finds in /usr (Debian's python3-pybind11
    beside pybind11-dev). Then the compile lines are those of the preset python, so a compiler cache shares its
    objects (the include directory would otherwise differ)."""
    try:
        import pybind11
    except ImportError:
        return None
    try:
        with open("/usr/lib/cmake/pybind11/pybind11ConfigVersion.cmake", encoding="utf-8") as f:
            system_version = re.search(r'set\(PACKAGE_VERSION "([^"]+)"\)', f.read())
        if system_version and system_version.group(1) == pybind11.__version__:
            return None
    except OSError:
        pass
    return pybind11.get_cmake_dir()


class CMakeExtension(Extension):
    def __init__(self, name, target):
        super().__init__(name, sources=[])
        self.target = target


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.path.abspath(os.environ.get("SPATTN_BUILD_DIR") or os.path.join(ROOT, "build-pip"))
        user_args = shlex.split(os.environ.get("SPATTN_CMAKE_ARGS", ""))
        args = [f"-DPython_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release", "-DSPATTN_BUILD_PYTHON=ON",
                "-DSPATTN_BUILD_PYTHON_TESTS=OFF", "-DSPATTN_BUILD_TESTS=OFF", "-DSPATTN_BUILD_TOOLS=OFF",
                "-DSPATTN_BUILD_BENCH=OFF"]
        pybind11_dir = pybind11_cmake_dir()
        if pybind11_dir and not any(a.startswith("-Dpybind11_DIR=") for a in user_args):
            args.append(f"-Dpybind11_DIR={pybind11_dir}")

        cuda = switch("SPATTN_ENABLE_CUDA")
        nvcc = find_nvcc()
        if cuda and not nvcc:
            raise RuntimeError("SPATTN_ENABLE_CUDA=ON but no nvcc: set CUDACXX or put nvcc on PATH")
        if cuda is None:
            cuda = nvcc is not None
        args.append(f"-DSPATTN_ENABLE_CUDA={'ON' if cuda else 'OFF'}")
        if cuda:
            args.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
            archs = os.environ.get("SPATTN_CUDA_ARCHITECTURES", "").strip()
            if archs:
                arch_list = [a for a in re.split(r"[;, ]+", archs) if a]
                gencode = ";".join(f"-gencode=arch=compute_{a},code=sm_{a}" for a in arch_list)
                args += [f"-DCMAKE_CUDA_ARCHITECTURES={';'.join(arch_list)}", f"-DSPATTN_CUDA_GENCODE={gencode}"]
        print(f"spattn: CUDA backend {'ON (' + nvcc + ')' if cuda else 'OFF'}; CMake build tree {build_dir}",
              flush=True)

        os.makedirs(build_dir, exist_ok=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(self.parallel or os.cpu_count() or 1)
        self.run_cmake(["cmake", "-S", ROOT, "-B", build_dir, *args, *user_args])
        self.run_cmake(["cmake", "--build", build_dir, "--target", ext.target, "-j", jobs])

        # python/CMakeLists.txt puts the module in <build>/python/spattn, named with this Python's suffix.
        module_dir = os.path.join(build_dir, "python", "spattn")
        built = os.path.join(module_dir, ext.target + sysconfig.get_config_var("EXT_SUFFIX"))
        if not os.path.isfile(built):
            found = glob.glob(os.path.join(module_dir, ext.target + "*"))
            raise RuntimeError(f"the build made no {built} (there: {found})")
        destination = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        shutil.copyfile(built, destination)

    @staticmethod
    def run_cmake(command):
        print("+ " + shlex.join(command), flush=True)
        subprocess.run(command, check=True)


setup(
    version=cmake_project_version(),
    package_dir={"": "python"},
    packages=["spattn"],
    ext_modules=[CMakeExtension("spattn._spattn", target="_spattn")],
    cmdclass={"build_ext": CMakeBuild},
    # Not build/: that is the CMake tree of the default preset.
    options={"build": {"build_base": os.path.join("build-pip", "setuptools")}},
)
