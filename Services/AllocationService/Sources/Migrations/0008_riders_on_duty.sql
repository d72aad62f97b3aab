-- The operators' live map lists the riders on duty (not Offline), most recently changed first.
CREATE INDEX riders_on_duty ON riders (updated_at DESC) WHERE status <> 'offline';
