@RTM-0 @requires-routing
Feature: Routing 02 - Finding matching routes

  Matching tries seven steps in order and stops at the first step at which
  one or more routes match: (1) service name and broker instance both match,
  when the conversation names a broker instance; (2) the service name
  matches among routes that name no broker instance; (3) when the
  conversation names no broker instance, the service name matches among
  routes that name one - if they name different broker instances, one is
  picked arbitrarily and only its routes match; (4) a route to a dynamic
  routing service with no request pending for it: the conversation is
  delayed and routing information is requested; (5) a route that names
  neither service nor broker instance; (6) when the conversation names a
  broker instance and a database of this instance holds the service, as if
  a LOCAL route existed; (7) the conversation is delayed. A delayed
  conversation is matched again after a time-out; not finding a route is
  not an error.

  Each scenario replaces the route table of sql1's database "shop", where
  the dialogs begin.

  Background:
    Given the topology "routing"

  @RTM-1
  Scenario: [1] Step 1 decides when the conversation names a broker instance, before step 2
    Given dialog "D1" is begun from service "Initiator" to service "Target" on the broker instance of sql2.orders
    And the routes in database "shop" of "sql1" are:
      | name    | service_name | broker_instance | address                 |
      | Exact   | Target       | sql2.orders     | TCP://sql2.example:4022 |
      | ByName  | Target       |                 | TCP://sql5.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" at "sql1" shows exactly:
      | event          | instance | step  | routes |
      | routes matched | sql1     | RTM-1 | Exact  |
    And the log for dialog "D1" at "sql1" shows exactly:
      | event               | address                 |
      | message transmitted | TCP://sql2.example:4022 |

  @RTM-2 @RTM-1
  Scenario: [2] Without a broker instance in the conversation step 1 does not apply and step 2 decides
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name    | service_name | broker_instance | address                 |
      | Exact   | Target       | sql2.orders     | TCP://sql2.example:4022 |
      | ByName  | Target       |                 | TCP://sql5.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" at "sql1" shows first:
      | event          | instance | step  | routes |
      | routes matched | sql1     | RTM-2 | ByName |
    And the log for dialog "D1" at "sql1" shows first:
      | event               | address                 |
      | message transmitted | TCP://sql5.example:4022 |

  @RTM-2
  Scenario: [3] Step 2 decides when no route names the conversation's broker instance
    Given dialog "D1" is begun from service "Initiator" to service "Target" on the broker instance of sql2.orders
    And the routes in database "shop" of "sql1" are:
      | name    | service_name | broker_instance | address                 |
      | Other   | Target       | sql1.stock      | LOCAL                   |
      | ByName  | Target       |                 | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" shows exactly:
      | event           | instance | step  | routes           | database |
      | routes matched  | sql1     | RTM-2 | ByName           | NULL     |
      | routes matched  | sql2     | RTM-5 | AutoCreatedLocal | NULL     |
      | message arrived | sql2     | NULL  | NULL             | orders   |

  @RTM-3
  Scenario: [4] Step 3 picks one broker instance arbitrarily and matches only its routes
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | broker_instance | address                 |
      | Orders1  | Target       | sql2.orders     | TCP://sql2.example:4022 |
      | Orders2  | Target       | sql2.orders     | TCP://sql5.example:4022 |
      | Stock    | Target       | sql1.stock      | LOCAL                   |
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" at "sql1" shows exactly:
      | event          | instance | step  | routes                    | broker_instance                                                              |
      | routes matched | sql1     | RTM-3 | Orders1, Orders2 or Stock | 00000000-0000-0000-0000-000000000021 or 00000000-0000-0000-0000-000000000012 |
    # where the message goes cannot show the pick (any of the routes is the choice of some broker
    # instance); that it goes at all shows step 3 matched: without it the conversation waits (RTM-8)
    And the log for dialog "D1" at "sql1" has no "conversation delayed" event
    And the log for dialog "D1" has no "message dropped" event

  @RTM-3 @RTM-2
  Scenario: [5] Step 2 pre-empts step 3
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | broker_instance | address                 |
      | Orders   | Target       | sql2.orders     | TCP://sql2.example:4022 |
      | ByName   | Target       |                 | LOCAL                   |
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" at "sql1" shows exactly:
      | event          | step  | routes |
      | routes matched | RTM-2 | ByName |
    And the log for dialog "D1" shows exactly:
      | event               | instance |
      | message arrived     | sql1     |
    And the log for dialog "D1" has no "message transmitted" event

  @RTM-4 @requires-dynamic-routing
  Scenario: [6] Step 4 delays the conversation and asks the dynamic routing service, before step 5
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name             | service_name                                                             | address                 |
      | Dynamic          | http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice | TCP://sql5.example:4022 |
      | AutoCreatedLocal |                                                                          | LOCAL                   |
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" shows exactly:
      | event             | instance | step  | route   | service |
      | routes matched    | sql1     | RTM-4 | NULL    | NULL    |
      | routing requested | sql1     | NULL  | Dynamic | Target  |
    # step 4 both delays and asks; the documents name no order between the two
    And the log for dialog "D1" shows exactly:
      | event                | instance | step  |
      | routes matched       | sql1     | RTM-4 |
      | conversation delayed | sql1     | RTM-4 |
    And the log for dialog "D1" has no "message arrived" event

  @RTM-4 @RTM-2
  Scenario: [7] A route for the service pre-empts the dynamic routing service
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name                                                             | address                 |
      | Dynamic  | http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice | TCP://sql5.example:4022 |
      | ByName   | Target                                                                   | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" has no "routing requested" event
    And the log for dialog "D1" shows exactly:
      | event           | step  | database |
      | routes matched  | RTM-2 | NULL     |
      | routes matched  | RTM-5 | NULL     |
      | message arrived | NULL  | orders   |

  @RTM-4 @RTM-5 @requires-dynamic-routing
  Scenario: [8] While a request is pending for the route, step 4 does not match and step 5 decides
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And dialog "D2" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name             | service_name                                                             | address                 |
      | Dynamic          | http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice | TCP://sql5.example:4022 |
      | AutoCreatedLocal |                                                                          | LOCAL                   |
    And a message is sent on dialog "D1"
    When a message is sent on dialog "D2"
    Then the log for dialog "D2" shows exactly:
      | event           | instance | step  | routes           | database |
      | routes matched  | sql1     | RTM-5 | AutoCreatedLocal | NULL     |
      | message arrived | sql1     | NULL  | NULL             | shop     |

  @RTM-4 @RTM-8 @requires-dynamic-routing
  Scenario: [9] The answer of the dynamic routing service is used when the delayed conversation is matched again
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name    | service_name                                                             | address                 |
      | Dynamic | http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice | TCP://sql5.example:4022 |
    And a message is sent on dialog "D1"
    And time passes to second {delayed_retry_s} - 0.5
    And the dynamic routing service answers for service "Target" in database "shop" of "sql1" with ADDRESS = TCP://sql2.example:4022
    # the message arrives at once or at the next 2nd notification, as the transport connects
    When time passes to second {delayed_retry_s} + 10
    Then the log for dialog "D1" at "sql1" shows exactly:
      | second            | event                | step  |
      | 0                 | routes matched       | RTM-4 |
      | 0                 | conversation delayed | RTM-4 |
      | {delayed_retry_s} | routes matched       | RTM-2 |
    And the log for dialog "D1" at "sql2" shows exactly:
      | event           | step  | database |
      | routes matched  | RTM-5 | NULL     |
      | message arrived | NULL  | orders   |
    # what a broker shows of the time-out: the answer is taken up when the conversation is matched again, not at once
    And the log for dialog "D1" has no "message transmitted" event until second {delayed_retry_s} - 0.001

  @RTM-5
  Scenario: [10] Step 5 matches a route that names neither service nor broker instance
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | Anything |              | TCP://sql2.example:4022 |
      | ForOther | Ledger       | LOCAL                   |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" shows exactly:
      | event           | instance | step  | routes   | database |
      | routes matched  | sql1     | RTM-5 | Anything | NULL     |
      | routes matched  | sql2     | RTM-5 | AutoCreatedLocal | NULL |
      | message arrived | sql2     | NULL  | NULL     | orders   |

  @RTM-6 @RTL-2
  Scenario: [11] Step 6 routes as if a LOCAL route existed when the conversation names a broker instance held here
    Given dialog "D1" is begun from service "Initiator" to service "Target" on the broker instance of sql1.stock
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ForOther | Ledger       | TCP://sql3.example:4022 |
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" shows exactly:
      | event           | instance | step  | database |
      | routes matched  | sql1     | RTM-6 | NULL     |
      | message arrived | sql1     | NULL  | stock    |

  @RTM-6 @RTM-7
  Scenario: [12] Without a broker instance in the conversation step 6 does not apply and step 7 delays it
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ForOther | Ledger       | TCP://sql3.example:4022 |
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" shows exactly:
      | event                | instance | step  |
      | routes matched       | sql1     | RTM-7 |
      | conversation delayed | sql1     | RTM-7 |

  @RTM-6 @RTM-5 @RTL-2
  Scenario: [13] Step 5 pre-empts step 6
    Given dialog "D1" is begun from service "Initiator" to service "Target" on the broker instance of sql1.stock
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | Anything |              | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" shows first:
      | event               | instance | step  |
      | routes matched      | sql1     | RTM-5 |
      | message transmitted | sql1     | NULL  |
      | routes matched      | sql2     | RTM-5 |
    # sql2 holds no database of sql1.stock's broker instance, so the LOCAL route it chose finds no service (RTL-2):
    # Service Broker "may return to step 2 and choose another route", and with none it is dropped, or the
    # conversation is delayed ("failure to find a matching route is not considered an error"); never delivered
    And the log for dialog "D1" has no "message arrived" event
    And the log for dialog "D1" at "sql2" has no "message transmitted" event

  @RTM-7 @RTM-8
  Scenario: [14] With no route at all the conversation is delayed, which is not an error
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ForOther | Ledger       | TCP://sql3.example:4022 |
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" shows exactly:
      | event                | step  |
      | conversation delayed | RTM-7 |
    And the log for dialog "D1" has no "message dropped" event

  @RTM-8
  Scenario: [15] A delayed conversation is matched again after the time-out and finds a route created meanwhile
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ForOther | Ledger       | TCP://sql3.example:4022 |
    And a message is sent on dialog "D1"
    And time passes to second {delayed_retry_s} - 0.5
    And in database "shop" of "sql1": CREATE ROUTE ToOrders WITH SERVICE_NAME = 'Target', ADDRESS = 'TCP://sql2.example:4022'
    # the message arrives at once or at the next 2nd notification, as the transport connects
    When time passes to second {delayed_retry_s} + 10
    Then the log for dialog "D1" at "sql1" shows exactly:
      | second            | event                | step  |
      | 0                 | routes matched       | RTM-7 |
      | 0                 | conversation delayed | RTM-7 |
      | {delayed_retry_s} | routing retried      | NULL  |
      | {delayed_retry_s} | routes matched       | RTM-2 |
    And the log for dialog "D1" at "sql2" shows exactly:
      | event           | step  | database |
      | routes matched  | RTM-5 | NULL     |
      | message arrived | NULL  | orders   |

  @RTM-8
  Scenario: [16] A conversation that still finds no route stays delayed and is matched again after each time-out
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ForOther | Ledger       | TCP://sql3.example:4022 |
    And a message is sent on dialog "D1"
    When time passes to second 2 * {delayed_retry_s} + 0.5
    Then the log for dialog "D1" shows exactly:
      | second                | event                |
      | 0                     | conversation delayed |
      | {delayed_retry_s}     | conversation delayed |
      | 2 * {delayed_retry_s} | conversation delayed |
    And the log for dialog "D1" has no "message dropped" event

  @RTM-3
  Scenario: [17] Step 3 matches only the routes for the conversation's service, whatever broker instance they name
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | broker_instance | address                 |
      | ForOther | Ledger       | sql3.ledger     | TCP://sql3.example:4022 |
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" at "sql1" shows exactly:
      | event                | step  |
      | conversation delayed | RTM-7 |
    And the log for dialog "D1" has no "message transmitted" event

  @RTM-1 @RTM-2
  Scenario: [18] Step 1 needs the service name to match as well as the broker instance
    Given dialog "D1" is begun from service "Initiator" to service "Target" on the broker instance of sql2.orders
    And the routes in database "shop" of "sql1" are:
      | name   | service_name | broker_instance | address                 |
      | Other  | Ledger       | sql2.orders     | TCP://sql5.example:4022 |
      | ByName | Target       |                 | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" at "sql1" shows exactly:
      | event          | step  | routes |
      | routes matched | RTM-2 | ByName |
    And the log for dialog "D1" at "sql1" shows exactly:
      | event               | address                 |
      | message transmitted | TCP://sql2.example:4022 |

  @RTM-8
  Scenario: [19] The messages queued behind a delayed one go with it once a route is found at a later retry
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ForOther | Ledger       | TCP://sql3.example:4022 |
    And 3 messages are sent on dialog "D1"
    And time passes to second {delayed_retry_s} + 0.5
    And in database "shop" of "sql1": CREATE ROUTE ToStock WITH SERVICE_NAME = 'Target', ADDRESS = 'LOCAL'
    # found at the retry after the time-out (RTM-8) or when the transmitter takes up the new route (PER-2B)
    When time passes to second 2 * {delayed_retry_s} + 10
    Then the log for dialog "D1" shows exactly:
      | event           | message_sequence_number |
      | message arrived | 0                       |
      | message arrived | 1                       |
      | message arrived | 2                       |

  @RTM-8
  Scenario: [20] A delayed message keeps the instant it entered the transmission queue while it is matched again
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ForOther | Ledger       | TCP://sql3.example:4022 |
    And time passes to second 2
    And a message is sent on dialog "D1"
    When time passes to second 2 + 2 * {delayed_retry_s} + 0.5
    Then the log for dialog "D1" shows exactly:
      | second                    | event                |
      | 2                         | conversation delayed |
      | 2 + {delayed_retry_s}     | conversation delayed |
      | 2 + 2 * {delayed_retry_s} | conversation delayed |
    And the transmission queue of "sql1" has held message D1:0 since second 2

  @RTM-4 @requires-dynamic-routing
  Scenario: [21] Once the dynamic routing service has answered, its route dropped, routing information is requested again
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And dialog "D2" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name    | service_name                                                             | address                 |
      | Dynamic | http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice | TCP://sql5.example:4022 |
    And a message is sent on dialog "D1"
    And time passes to second 1
    And the dynamic routing service answers for service "Target" in database "shop" of "sql1" with ADDRESS = TCP://sql2.example:4022
    And in database "shop" of "sql1": DROP ROUTE Dynamic_Target
    When a message is sent on dialog "D2"
    Then the log at "sql1" shows exactly from second 1:
      | second | event         | database | route          |
      | 1      | route created | shop     | Dynamic_Target |
      | 1      | route dropped | shop     | Dynamic_Target |
    And the log for dialog "D2" at "sql1" shows exactly:
      | second | event             | route   | service |
      | 1      | routing requested | Dynamic | Target  |

  @RTM-4 @requires-dynamic-routing
  Scenario: [22] An answer for one service leaves the other services' routing requests pending
    Given dialog "C1" is begun from service "Initiator" to service "Clerk"
    And dialog "L1" is begun from service "Initiator" to service "Ledger"
    And dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name    | service_name                                                             | address                 |
      | Dynamic | http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice | TCP://sql5.example:4022 |
    And a message is sent on dialog "C1"
    And a message is sent on dialog "L1"
    And a message is sent on dialog "D1"
    And time passes to second 1
    And the dynamic routing service answers for service "Ledger" in database "shop" of "sql1" with ADDRESS = TCP://sql3.example:4022
    # Clerk and Target are matched again after the time-out: their requests are still pending, so none is made again
    When time passes to second {delayed_retry_s} + 1
    Then the log for dialog "C1" has 1 "routing requested" event
    And the log for dialog "D1" has 1 "routing requested" event


  # Each step asks "uma correspondência exata para o nome do serviço": a route for "target" is no route for
  # "Target".
  @RTM-2 @RTM-7
  Scenario: [23] A route whose service name differs from the conversation's only in case does not match
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name  | service_name | address                 |
      | Lower | target       | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" at "sql1" shows first:
      | second | event                | step  |
      | 0      | conversation delayed | RTM-7 |
    And the log for dialog "D1" has no "message transmitted" event

  # Step 5 takes a route "que não especifique nem o nome de serviço nem o identificador do Service Broker": one
  # that names a broker instance and no service is neither a catch-all nor a route for the service.
  @RTM-5 @RTM-7
  Scenario: [24] A route that names a broker instance and no service is no catch-all
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name   | service_name | broker_instance | address                 |
      | OnlyBI |              | sql2.orders     | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" at "sql1" shows first:
      | second | event                | step  |
      | 0      | conversation delayed | RTM-7 |
    And the log for dialog "D1" has no "message transmitted" event

  # Step 3 is "se a conversação não especificar um identificador do Service Broker": a conversation that names
  # one, with only another broker instance's route for its service, goes on to step 6.
  @RTM-3 @RTM-6
  Scenario: [25] Step 3 does not apply when the conversation names a broker instance, however many routes name others
    Given dialog "D1" is begun from service "Initiator" to service "Target" on the broker instance of sql1.audit
    And the routes in database "shop" of "sql1" are:
      | name  | service_name | broker_instance | address                 |
      | Other | Target       | sql2.orders     | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" shows exactly:
      | event           | instance | step  | database |
      | routes matched  | sql1     | RTM-6 | NULL     |
      | message arrived | sql1     | NULL  | audit    |
    And the log for dialog "D1" has no "message transmitted" event

  @RTM-7 @RTM-8
  Scenario: [26] The conversation is delayed, not the message: a later message waits behind it even when it has a route
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ForOther | Ledger       | TCP://sql3.example:4022 |
    And a message is sent on dialog "D1"
    And time passes to second {delayed_retry_s} - 0.3
    And in database "shop" of "sql1": CREATE ROUTE ToStock WITH SERVICE_NAME = 'Target', ADDRESS = 'LOCAL'
    And 2 messages are sent on dialog "D1"
    # the first goes at the retry after the time-out (RTM-8) or when the transmitter takes up the new route (PER-2B),
    # and the others with it or after it, never before it
    When time passes to second 2 * {delayed_retry_s} + 10
    Then the log for dialog "D1" shows exactly:
      | event           | message_sequence_number |
      | message arrived | 0                       |
      | message arrived | 1                       |
      | message arrived | 2                       |

  # ALTER ROUTE changes what a route matches: the conversation is matched again "depois de um tempo limite" (RTM-8)
  # with the route table as it is then, so a route whose service name was altered to the conversation's matches.
  @RTM-8 @RTM-2 @RTM-7
  Scenario: [27] A delayed conversation is matched again after the time-out and finds a route altered meanwhile to its service
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ForOther | Ledger       | TCP://sql3.example:4022 |
    And a message is sent on dialog "D1"
    And time passes to second {delayed_retry_s} - 0.5
    And in database "shop" of "sql1": ALTER ROUTE ForOther WITH SERVICE_NAME = 'Target', ADDRESS = 'TCP://sql2.example:4022'
    # the message arrives at once or at the next 2nd notification, as the transport connects
    When time passes to second {delayed_retry_s} + 10
    Then the log for dialog "D1" at "sql1" shows exactly:
      | second            | event                | step  | routes   |
      | 0                 | routes matched       | RTM-7 | (none)   |
      | 0                 | conversation delayed | RTM-7 | NULL     |
      | {delayed_retry_s} | routes matched       | RTM-2 | ForOther |
    And the log for dialog "D1" at "sql1" shows exactly:
      | event               | address                 |
      | message transmitted | TCP://sql2.example:4022 |
    And the log for dialog "D1" shows exactly:
      | event           | instance | database |
      | message arrived | sql2     | orders   |
    And the log for dialog "D1" has no "message transmitted" event until second {delayed_retry_s} - 0.001

  # Step 4 asks only while "nenhuma solicitação pendente para a rota do serviço": once the service has answered, a
  # new conversation is matched by the route the answer created (step 2), and the delayed one at its time-out; a
  # conversation that step 5 routed while the request was pending has arrived already and stays where it arrived.
  @RTM-4 @RTM-5 @RTM-8 @requires-dynamic-routing
  Scenario: [28] Once the dynamic routing service has answered, a new conversation and the delayed one take its route, and one already routed by step 5 stays where it arrived
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And dialog "D2" is begun from service "Initiator" to service "Target"
    And dialog "D3" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name             | service_name                                                             | address                 |
      | Dynamic          | http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice | TCP://sql5.example:4022 |
      | AutoCreatedLocal |                                                                          | LOCAL                   |
    And a message is sent on dialog "D1"
    And a message is sent on dialog "D2"
    And time passes to second {delayed_retry_s} - 0.5
    And the dynamic routing service answers for service "Target" in database "shop" of "sql1" with ADDRESS = TCP://sql2.example:4022
    And a message is sent on dialog "D3"
    When time passes to second {delayed_retry_s} + 10
    Then the log for dialog "D3" at "sql1" shows exactly:
      | second                  | event          | step  | routes         |
      | {delayed_retry_s} - 0.5 | routes matched | RTM-2 | Dynamic_Target |
    And the log for dialog "D3" has no "routing requested" event
    And the log for dialog "D3" shows exactly:
      | event           | instance | database |
      | message arrived | sql2     | orders   |
    And the log for dialog "D1" at "sql1" shows exactly:
      | second            | event             | step  | routes         |
      | 0                 | routes matched    | RTM-4 | (none)         |
      | 0                 | routing requested | NULL  | NULL           |
      | {delayed_retry_s} | routes matched    | RTM-2 | Dynamic_Target |
    And the log for dialog "D1" shows exactly:
      | event           | instance | database |
      | message arrived | sql2     | orders   |
    And the log for dialog "D2" shows exactly:
      | event             | instance | step  | database |
      | routes matched    | sql1     | RTM-5 | NULL     |
      | message arrived   | sql1     | NULL  | shop     |

  # A delayed conversation matched again finds a route to an instance that cannot be reached: it then waits for its
  # connection, where it waited all along ("routing it again that leaves it waiting there keeps" received_ms,
  # docs/implementing.md), and is neither dropped nor delayed again: failing to find a route was no error (RTM-8).
  @RTM-8 @RTM-2 @RTM-7
  Scenario: [29] A delayed conversation that finds a route to an instance that cannot be reached waits for its connection in the transmission queue since its SEND
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ForOther | Ledger       | TCP://sql3.example:4022 |
    And a message is sent on dialog "D1"
    And instance "sql2" cannot be reached
    And in database "shop" of "sql1": CREATE ROUTE ToOrders WITH SERVICE_NAME = 'Target', ADDRESS = 'TCP://sql2.example:4022'
    # matched again at the time-out (RTM-8), or when the transmitter takes up the new route (PER-2B)
    When time passes to second {delayed_retry_s} + 10
    Then the log for dialog "D1" at "sql1" shows first:
      | event          | step  | routes   |
      | routes matched | RTM-7 | (none)   |
      | routes matched | RTM-2 | ToOrders |
    And the transmission queue of "sql1" has held message D1:0 since second 0
    And the log for dialog "D1" has 1 "conversation delayed" event
    And the log for dialog "D1" has no "message dropped" event
    And the log for dialog "D1" has no "message arrived" event

  # At a forwarder the message came from outside and is routed with msdb.sys.routes (RTE-01). Its route dropped
  # while it waits there for a connection that never comes: whether the transmitter takes the change up for a
  # message in a forwarder's memory the periodic document leaves open (it "reclassifies all or selected dialogs";
  # forwarded messages are "held in memory and not persisted in any queue"), so the message either waits on for its
  # address or is matched again and finds no route (RTM-7). Either way it goes nowhere else, and the forwarder
  # deletes it 60 seconds after it came (PER-5B: at the 5th notification at 75, since it came by second 10).
  @RTM-7 @RTE-01 @PER-5B @requires-forwarding @requires-periodic-tasks
  Scenario: [30] A message waiting at a forwarder whose route there is dropped goes nowhere else and is deleted 60 seconds after it came
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name | service_name | address                 |
      | Via5 | Target       | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name | service_name | address                 |
      | To2  | Target       | TCP://sql2.example:4022 |
    And instance "sql2" cannot be reached
    And time passes to second 3
    And a message is sent on dialog "D1"
    And time passes to second 12
    When in msdb of "sql5": DROP ROUTE To2
    And time passes to second 80
    # message_forwarded may be reported when the forwarder decides on the message (docs/protocol.md): not held
    Then the log for dialog "D1" has no "message arrived" event
    And the log for dialog "D1" has no "message transmitted" event where address is "TCP://sql2.example:4022"
    And the log for dialog "D1" shows first:
      | second | event                     | instance |
      | 75     | forwarded message deleted | sql5     |

  # A forwarder's dynamic routing: step 4 at the forwarder asks the dynamic routing service its msdb.sys.routes
  # names (RTE-01: "o processo de correspondência básico é idêntico"), and the message it holds goes on by the
  # answer once matched again: at its time-out, or at the forwarder's next 2nd notification, the answer having
  # created a route for its service (PER-2B), so well within the 60 seconds the forwarder keeps it (PER-5B).
  @RTM-4 @RTE-01 @RTX-1 @requires-dynamic-routing @requires-forwarding @requires-periodic-tasks
  Scenario: [31] A forwarder asks its own dynamic routing service for a message from outside and forwards it by the answer
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name | service_name | address                 |
      | Via5 | Target       | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name    | service_name                                                             | address                 |
      | Dynamic | http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice | TCP://sql1.example:4022 |
    And a message is sent on dialog "D1"
    And time passes to second 11
    And the dynamic routing service answers for service "Target" in msdb of "sql5" with ADDRESS = TCP://sql2.example:4022
    When time passes to second 40
    Then the log for dialog "D1" shows each once:
      | event             | instance | table           | route   | hops | database |
      | routing requested | sql5     | msdb.sys.routes | Dynamic | NULL | NULL     |
      | message forwarded | sql5     | NULL            | NULL    | 1    | NULL     |
      | message arrived   | sql2     | NULL            | NULL    | NULL | orders   |
    And the log for dialog "D1" has no "forwarded message deleted" event

  # The answer creates a route for the service it was asked about (RTM-4), and the conversation delayed for it is
  # matched again after its time-out (RTM-8); a conversation of another service that waits for its connection was
  # matched already and goes on waiting where it was routed: the answer asks nothing of it and drops nothing.
  @RTM-4 @RTM-8 @requires-dynamic-routing
  Scenario: [32] The dynamic routing service's answer for one service leaves a message of another service waiting for its connection where it was
    Given dialog "C1" is begun from service "Initiator" to service "Clerk"
    And dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name                                                             | address                 |
      | Dynamic  | http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice | TCP://sql5.example:4022 |
      | ToOrders | Target                                                                   | TCP://sql2.example:4022 |
    And instance "sql2" cannot be reached
    And a message is sent on dialog "D1"
    And a message is sent on dialog "C1"
    And time passes to second {delayed_retry_s} - 0.5
    And the dynamic routing service answers for service "Clerk" in database "shop" of "sql1" with ADDRESS = LOCAL
    When time passes to second {delayed_retry_s} + 10
    Then the log for dialog "C1" at "sql1" shows exactly:
      | second            | event             | step  | routes        |
      | 0                 | routes matched    | RTM-4 | (none)        |
      | 0                 | routing requested | NULL  | NULL          |
      | {delayed_retry_s} | routes matched    | RTM-2 | Dynamic_Clerk |
    And the log for dialog "C1" shows exactly:
      | event           | instance | database |
      | message arrived | sql1     | hr       |
    And the transmission queue of "sql1" has held message D1:0 since second 0
    And the log for dialog "D1" has no "routing requested" event
    And the log for dialog "D1" has no "conversation delayed" event
    And the log for dialog "D1" has no "message dropped" event
    And the log for dialog "D1" has no "message arrived" event

  # Step 6 has two conditions, each needed: the conversation names a broker instance (falsified alone in [12]) and
  # "se a instância contiver um ou mais bancos de dados que contêm serviços com nomes que correspondem ao nome
  # especificado na conversação". Here the first holds and the second does not: no database of sql1 holds Ledger.
  @RTM-6 @RTM-7
  Scenario: [33] Step 6 does not apply when no database of this instance holds the service, though the conversation names a broker instance
    Given dialog "D1" is begun from service "Initiator" to service "Ledger" on the broker instance of sql3.ledger
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ForOther | Archive      | TCP://sql4.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" shows first:
      | event                | instance | step  |
      | routes matched       | sql1     | RTM-7 |
      | conversation delayed | sql1     | RTM-7 |
    And the log for dialog "D1" has no "message dropped" event
    And the log for dialog "D1" has no "message transmitted" event
    And the log for dialog "D1" has no "message arrived" event

  # The copy of a mirrored database that is the mirror holds no service for routing (docs/implementing.md section 3:
  # routing "pode redirecionar conversações de forma transparente para o parceiro ativo"), so step 6's "se a
  # instância contiver um ou mais bancos de dados que contêm serviços" does not hold at sql4 while its copy of ledger
  # is the mirror: the message waits at its origin, delayed (RTM-7), and is not dropped; after the failover, matched
  # again at its time-out (RTM-8), it is routed as if a LOCAL route existed and arrives in the copy now the principal.
  @RTM-6 @RTM-7 @RTM-8 @RTL-2 @requires-mirroring
  Scenario: [34] Step 6 does not count the mirror copy of a database as holding its service, and counts it once it is the principal
    Given dialog "D1" is begun from service "Archive" to service "Ledger" on the broker instance of sql4.ledger
    And the routes in database "archive" of "sql4" are:
      | name     | service_name | address                 |
      | ForOther | Target       | TCP://sql2.example:4022 |
    And a message is sent on dialog "D1"
    And time passes to second 0.5
    And the copy of database "ledger" on "sql4" becomes the principal
    When time passes to second {delayed_retry_s} + 1
    Then the log for dialog "D1" shows exactly:
      | second            | event                | instance | step  | database |
      | 0                 | routes matched       | sql4     | RTM-7 | NULL     |
      | 0                 | conversation delayed | sql4     | RTM-7 | NULL     |
      | {delayed_retry_s} | routes matched       | sql4     | RTM-6 | NULL     |
      | {delayed_retry_s} | route chosen         | sql4     | RTC-2 | NULL     |
      | {delayed_retry_s} | message arrived      | sql4     | NULL  | ledger   |
    And the log for dialog "D1" has no "message dropped" event

  # Step 4 asks one service: "Se houver uma rota para um serviço de roteamento dinâmico e nenhuma solicitação
  # pendente para a rota do serviço, marque a conversação como atrasada e solicite informações de roteamento daquele
  # serviço". One request is made at a matching, whichever of the two routes it goes by; when the conversation is
  # matched again (RTM-8), "a rota do serviço" reads as the dynamic route (the other is asked then) or as the route
  # the request is for (none is, while it is pending): docs/implementing.md section 3.
  @RTM-4 @requires-dynamic-routing
  Scenario: [35] Of two routes to dynamic routing services one is asked at a matching
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name                                                             | address                 |
      | DynamicA | http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice | TCP://sql5.example:4022 |
      | DynamicB | http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice | TCP://sql4.example:4022 |
    And a message is sent on dialog "D1"
    When time passes to second {delayed_retry_s} - 0.5
    Then the log for dialog "D1" at "sql1" shows exactly:
      | second | event                | step  | route                |
      | 0      | routes matched       | RTM-4 | NULL                 |
      | 0      | routing requested    | NULL  | DynamicA or DynamicB |
      | 0      | conversation delayed | RTM-4 | NULL                 |
