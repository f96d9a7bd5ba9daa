"""A passthrough publisher in Python: every record batch of the input goes out
unchanged (as the bytes it came in: the SDK decodes no column it is not asked
for) into the table its publisher declares. It names no table, so one build
serves any topic.

    weir plugin build .     (componentize-py, with ../weir on its path)
"""
import weir


@weir.publisher
def publish(slots):
    table = weir.tables()[0]
    rows = 0
    for batch in slots[0]:
        weir.write(table, batch)
        rows += batch.num_rows
    print(f"passed {rows} rows from {slots[0].source} into {table}")
