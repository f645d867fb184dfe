{{ config(indexes=[{'columns': ['customer']}]) }}

select
    customer,
    count(*) as orders,
    sum(amount) as total
from {{ ref('stg_orders') }}
group by customer
