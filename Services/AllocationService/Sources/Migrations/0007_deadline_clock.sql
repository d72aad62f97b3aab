-- When a deadline round last ran on any instance. The first round after the database was unreachable moves the
-- receipt deadlines that had not passed by then by the outage's length: riders' apps could not confirm their offers
-- while it lasted. One row; every round moves it forward.
CREATE TABLE deadline_clock (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    last_round_at timestamptz NOT NULL
);
