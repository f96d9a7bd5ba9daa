"""A passthrough publisher in Python: every record batch of the input goes out
unchanged as the table `clicks` (as the bytes it came in: the SDK decodes no
column it is not asked for).

    weir plugin build .     (componentize-py, with ../weir on its path)
"""
import weir


@weir.publisher
def publish(slots):
    rows = 0
    for batch in slots[0]:
        weir.write("clicks", batch)
        rows += batch.num_rows
    print(f"passed {rows} rows through")
