"""Maps the repository's top-level folders onto the one import package `tidegate`.

The folders `spec/`, `sim/`, `runtime/` and `replica/` install as
`tidegate.spec`, `tidegate.sim`, `tidegate.runtime` and `tidegate.replica`;
`tidegate/` holds the umbrella package (version, CLI, builder re-exports).
Nothing named `spec` or `runtime` reaches site-packages.
"""

from setuptools import find_packages, setup

ROOTS = {
    "tidegate": "tidegate",
    "tidegate.spec": "spec",
    "tidegate.sim": "sim",
    "tidegate.runtime": "runtime",
    "tidegate.replica": "replica",
}

packages: list[str] = []
package_dir: dict[str, str] = {}
for name, folder in ROOTS.items():
    packages.append(name)
    package_dir[name] = folder
    for sub in find_packages(folder):
        packages.append(f"{name}.{sub}")

setup(packages=packages, package_dir=package_dir)
