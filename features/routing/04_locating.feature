@requires-routing
Feature: Routing 04 - Locating the service, acknowledgements and replies

  When the chosen route is LOCAL, Service Broker finds the service in this
  instance: in the database named by the broker instance identifier of the
  conversation or of the route, when there is one; otherwise first in the
  database that holds the conversation, then in the other databases, in an
  order that is unspecified and may differ between conversations.

  Once the initiator has the target's acknowledgement, it routes every
  later message of the conversation with the broker instance identifier
  the acknowledgement carried, so they reach the same target. A message
  from a target service that arrives from outside is delivered here when
  this instance holds the broker instance it names; otherwise the standard
  matching applies.

  Background:
    Given the topology "routing"

  @RTL-2
  Scenario: [1] The conversation's broker instance names the database
    Given dialog "D1" is begun from service "Initiator" to service "Target" on the broker instance of sql1.audit
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" shows exactly:
      | event           | instance | database |
      | message arrived | sql1     | audit    |

  @RTL-2
  Scenario: [2] The route's broker instance names the database
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name    | service_name | broker_instance | address |
      | ToStock | Target       | sql1.stock      | LOCAL   |
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" shows exactly:
      | event           | instance | database |
      | message arrived | sql1     | stock    |

  @RTL-3
  Scenario: [3] Without a broker instance the database of the conversation is searched first
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" shows exactly:
      | event           | instance | database |
      | message arrived | sql1     | shop     |

  @RTL-3
  Scenario: [4] When the conversation's database lacks the service, any other database holding it may receive
    Given dialog "C1" is begun from service "Clerk" to service "Target"
    When a message is sent on dialog "C1"
    Then the log for dialog "C1" shows exactly:
      | event           | instance | database                |
      | message arrived | sql1     | shop or stock or audit  |

  @RTL-3 @RTL-1
  Scenario: [5] A message from outside has no database of its own and may land in any database holding the service
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name   | service_name | address                 |
      | Round  | Target       | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name   | service_name | address                 |
      | Back   | Target       | TCP://sql1.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 20
    Then the log for dialog "D1" shows each once:
      | event           | instance | table           | database               |
      | routes matched  | sql1     | shop.sys.routes | NULL                   |
      | routes matched  | sql5     | msdb.sys.routes | NULL                   |
      | routes matched  | sql1     | msdb.sys.routes | NULL                   |
      | message arrived | sql1     | NULL            | shop or stock or audit |

  @RTE-04 @RTM-1
  Scenario: [6] After the acknowledgement later messages carry the target's broker instance
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ToOrders | Target       | TCP://sql2.example:4022 |
    And a message is sent on dialog "D1"
    And time passes to second 10
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | broker_instance | address                 |
      | Elsewhere| Target       |                 | LOCAL                   |
      | Pinned   | Target       | sql2.orders     | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" shows exactly:
      | event           | instance | message_sequence_number | broker_instance                      | step  | routes   | database |
      | routes matched  | sql1     | 0                       | NULL                                 | RTM-2 | ToOrders         | NULL     |
      | routes matched  | sql2     | 0                       | NULL                                 | RTM-5 | AutoCreatedLocal | NULL     |
      | message arrived | sql2     | 0                       | NULL                                 | NULL  | NULL             | orders   |
      | routes matched  | sql1     | 1                       | NULL                                 | RTM-1 | Pinned           | NULL     |
      | routes matched  | sql2     | 1                       | NULL                                 | RTM-5 | AutoCreatedLocal | NULL     |
      | message arrived | sql2     | 1                       | NULL                                 | NULL  | NULL             | orders   |

  @RTE-05
  Scenario: [7] A reply from the target is delivered by the broker instance it names, without matching
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ToOrders | Target       | TCP://sql2.example:4022 |
    And the routes in database "orders" of "sql2" are:
      | name     | service_name | address                 |
      | Back     | Initiator    | TCP://sql1.example:4022 |
    And the routes in msdb of "sql1" are:
      | name     | service_name | address                 |
      | Away     | Initiator    | TCP://sql5.example:4022 |
    And a message is sent on dialog "D1"
    And time passes to second 10
    When a reply is sent on dialog "D1"
    And time passes to second 20
    Then the log for dialog "D1" shows exactly from second 0:
      | event            | instance | from_target | table             | database |
      | routes matched   | sql1     | False       | shop.sys.routes   | NULL     |
      | routes matched   | sql2     | False       | msdb.sys.routes   | NULL     |
      | message arrived  | sql2     | False       | NULL              | orders   |
      | routes matched   | sql2     | True        | orders.sys.routes | NULL     |
      | reply recognised | sql1     | True        | NULL              | NULL     |
      | message arrived  | sql1     | True        | NULL              | shop     |

  @RTE-05 @requires-forwarding
  Scenario: [8] A reply reaching an instance without that broker instance is matched as usual
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ToOrders | Target       | TCP://sql2.example:4022 |
    And the routes in database "orders" of "sql2" are:
      | name     | service_name | address                 |
      | Via5     | Initiator    | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name     | service_name | address                 |
      | To1      | Initiator    | TCP://sql1.example:4022 |
    And a message is sent on dialog "D1"
    And time passes to second 10
    When a reply is sent on dialog "D1"
    And time passes to second 30
    Then the log for dialog "D1" shows each once:
      | event            | instance | from_target | table             | routes           | database |
      | routes matched   | sql1     | False       | shop.sys.routes   | ToOrders         | NULL     |
      | routes matched   | sql2     | False       | msdb.sys.routes   | AutoCreatedLocal | NULL     |
      | message arrived  | sql2     | False       | NULL              | NULL             | orders   |
      | routes matched   | sql2     | True        | orders.sys.routes | Via5             | NULL     |
      | routes matched   | sql5     | True        | msdb.sys.routes   | To1              | NULL     |
      | reply recognised | sql1     | True        | NULL              | NULL             | NULL     |
      | message arrived  | sql1     | True        | NULL              | NULL             | shop     |

  @RTE-04
  Scenario: [9] Every later message of an acknowledged conversation is pinned; a conversation not yet acknowledged is not
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And dialog "D2" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ToOrders | Target       | TCP://sql2.example:4022 |
    And a message is sent on dialog "D1"
    And time passes to second 10
    And the routes in database "shop" of "sql1" are:
      | name      | service_name | broker_instance | address                 |
      | Elsewhere | Target       |                 | TCP://sql5.example:4022 |
      | Pinned    | Target       | sql2.orders     | TCP://sql2.example:4022 |
    And 2 messages are sent on dialog "D1"
    When a message is sent on dialog "D2"
    And time passes to second 20
    Then the log for dialog "D1" at "sql1" shows exactly:
      | event               | message_sequence_number | address                 |
      | message transmitted | 0                       | TCP://sql2.example:4022 |
      | message transmitted | 1                       | TCP://sql2.example:4022 |
      | message transmitted | 2                       | TCP://sql2.example:4022 |
    And the log for dialog "D2" at "sql1" shows first:
      | event               | address                 |
      | message transmitted | TCP://sql5.example:4022 |

  @RTE-05
  Scenario: [10] A second reply is delivered by the broker instance it names as well, after the first
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ToOrders | Target       | TCP://sql2.example:4022 |
    And the routes in database "orders" of "sql2" are:
      | name     | service_name | address                 |
      | Back     | Initiator    | TCP://sql1.example:4022 |
    And the routes in msdb of "sql1" are:
      | name     | service_name | address                 |
      | Away     | Initiator    | TCP://sql5.example:4022 |
    And a message is sent on dialog "D1"
    And time passes to second 10
    When 2 replies are sent on dialog "D1"
    And time passes to second 20
    Then the log for dialog "D1" at "sql1" shows exactly from second 1:
      | event            | from_target | message_sequence_number | database |
      | reply recognised | True        | 0                       | NULL     |
      | message arrived  | True        | 0                       | shop     |
      | reply recognised | True        | 1                       | NULL     |
      | message arrived  | True        | 1                       | shop     |

  # "Procurando primeiro o nome do serviço no banco de dados que contém a conversação": audit holds the
  # conversation and the service, and stands after shop and stock in the instance; it is searched first all the same
  @RTL-3
  Scenario: [11] The database of the conversation is searched first wherever it stands among the instance's databases
    Given dialog "A1" is begun from service "audit.Target" to service "Target"
    When a message is sent on dialog "A1"
    Then the log for dialog "A1" shows exactly:
      | event           | instance | database |
      | message arrived | sql1     | audit    |
