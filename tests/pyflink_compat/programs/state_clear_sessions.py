"""ValueState cleared by the function: a per-key session of events ended by an 'end' marker."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor


class Sessions(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.started = runtime_context.get_state(ValueStateDescriptor("started", Types.BOOLEAN()))
        self.events = runtime_context.get_list_state(ListStateDescriptor("events", Types.STRING()))

    def process_element(self, value, ctx):
        user, action = value
        if action == "start":
            self.started.update(True)
        elif action == "end":
            if self.started.value():
                yield user, list(self.events.get())
            self.started.clear()
            self.events.clear()
        elif self.started.value():
            self.events.add(action)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [
    ("u1", "view"),
    ("u1", "start"),
    ("u2", "start"),
    ("u1", "click"),
    ("u2", "buy"),
    ("u1", "scroll"),
    ("u1", "end"),
    ("u2", "end"),
    ("u1", "click"),
    ("u1", "end"),
    ("u3", "start"),
    ("u3", "end"),
]
env.from_collection(events, type_info=Types.TUPLE([Types.STRING(), Types.STRING()])).key_by(lambda v: v[0]).process(
    Sessions()
).print()
env.execute("state_clear_sessions")
