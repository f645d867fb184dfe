{{ config(indexes=[{'default': True}]) }}

select id, customer, amount
from {{ ref('stg_orders') }}
where amount >= 100
