-- Plans, the plan each tenant is on, and per-tenant overrides (package
-- plans reads them through a cache; the admin API writes them).
CREATE TABLE sluice_plans (
    name       text        PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 256),
    -- An object of limit name to limit, as package plans writes it.
    limits     jsonb       NOT NULL CHECK (jsonb_typeof(limits) = 'object'),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sluice_tenants (
    tenant     text        PRIMARY KEY CHECK (octet_length(tenant) BETWEEN 1 AND 256),
    -- A plan in use cannot be deleted.
    plan       text        NOT NULL REFERENCES sluice_plans (name) ON DELETE RESTRICT,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sluice_overrides (
    tenant     text        NOT NULL CHECK (octet_length(tenant) BETWEEN 1 AND 256),
    name       text        NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 256),
    lim        jsonb       NOT NULL CHECK (jsonb_typeof(lim) = 'object'),
    -- NULL: never expires. An expired row stays until cleared; readers
    -- compare it with their own clock.
    expires_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, name)
);
