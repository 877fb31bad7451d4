"""tf_placeto: learn where each op of a TensorFlow graph should run (see README.md, BUILD.md).

The pins below are the stack that works today; BUILD.md says why each one exists.
"""

from setuptools import find_packages, setup

setup(
    name="tf-placeto",
    version="0.1.0",
    description="Device placement for real TensorFlow graphs: import, group, place, write back",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10,<3.14",
    packages=find_packages(include=["tf_placeto", "tf_placeto.*", "measure", "measure.*",
                                    "examples", "examples.*"]),
    install_requires=[
        "tensorflow==2.21.*",
        "tf-keras==2.21.*",
        "tf-agents==0.19.*",
        "tensorflow-probability==0.23.*",
        "numpy<2.4",
        "tensorboard",
        "protobuf",
        "pandas",
        "numba",
        "scipy",
        "pymetis",
        "matplotlib",
        "tqdm",
    ],
    extras_require={
        "test": ["pytest", "pytest-timeout"],
        "gpu": ["tensorflow[and-cuda]==2.21.*"],
    },
    # The trained policy shipped with the package: its SavedModel, checkpoints and log.
    package_data={"tf_placeto.policy": ["pretrained/*.json", "pretrained/policy/*.pb",
                                        "pretrained/policy/*.pbtxt",
                                        "pretrained/policy/variables/*",
                                        "pretrained/checkpoints/*"]},
    entry_points={"console_scripts": ["tf-placeto=tf_placeto.cli:main"]},
)
