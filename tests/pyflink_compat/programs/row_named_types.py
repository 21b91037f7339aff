"""Types.ROW_NAMED and Row: fields by name, Row results, and a keyed sum over Rows."""

from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
row_type = Types.ROW_NAMED(["city", "temp", "day"], [Types.STRING(), Types.DOUBLE(), Types.INT()])
readings = env.from_collection(
    [("Berlin", 12.5, 1), ("Paris", 15.0, 1), ("Berlin", 14.5, 2), ("Paris", 11.25, 2)], type_info=row_type
)
readings.map(
    lambda r: Row(city=r.city.upper(), fahrenheit=r.temp * 9 / 5 + 32),
    output_type=Types.ROW_NAMED(["city", "fahrenheit"], [Types.STRING(), Types.DOUBLE()]),
).print()
readings.filter(lambda r: r["day"] == 2).map(
    lambda r: (r[0], r.temp), output_type=Types.TUPLE([Types.STRING(), Types.DOUBLE()])
).print()
readings.map(lambda r: Row(r.city, r.temp), output_type=Types.ROW([Types.STRING(), Types.DOUBLE()])).key_by(
    lambda r: r[0]
).reduce(lambda a, b: Row(a[0], a[1] + b[1])).print()
env.execute("row_named_types")
