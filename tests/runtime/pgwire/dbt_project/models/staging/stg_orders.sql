select
    id,
    lower(customer) as customer,
    amount,
    status
from {{ source('shop', 'raw_orders') }}
where status <> 'cancelled'
