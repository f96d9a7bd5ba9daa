"""A passthrough publisher in Python: every record batch of the input goes out
unchanged (as the bytes it came in: the SDK decodes no column it is not asked
for) into the table its publisher declares. It names no table, so one build
serves any topic. With as many tables as input slots (a change log's, one a
source table), each slot goes to its own table.

    weir plugin build .     (componentize-py, with ../weir on its path)
"""
import weir


@weir.publisher
def publish(slots):
    tables = weir.tables()
    one_each = len(tables) == len(slots)
    for i, slot in enumerate(slots):
        table = tables[i if one_each else 0]
        rows = 0
        for batch in slot:
            weir.write(table, batch)
            rows += batch.num_rows
        print(f"passed {rows} rows from {slot.source} into {table}")
