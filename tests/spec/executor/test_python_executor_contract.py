"""The PythonExecutor passes the reusable executor contract (reference agreement and misuse)."""

from tidegate.spec.executor import Executor, PythonExecutor
from tidegate.spec.testing.executor import ExecutorContractTests


class TestPythonExecutorContract(ExecutorContractTests):
    def make_executor(self) -> Executor:
        return PythonExecutor()
